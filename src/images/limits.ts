/**
 * What an image may cost before the core reads it (docs/protocol.md#images). The count and the
 * pixels are the config's (`app.max_images`, `app.max_image_pixels`); these are fixed.
 */

/** An image's bytes, as given or as read from its path (checked by stat before a byte is read). */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/** Base64 characters checked between two turns of the event loop. */
export const BASE64_SLICE_CHARS = 1024 * 1024;
