/**
 * What an image may cost before the core reads it (docs/protocol.md#images). The count and the
 * pixels are the config's (`app.max_images`, `app.max_image_pixels`); these are fixed.
 */

/** An image's bytes, as given or as read from its path (checked by stat before a byte is read). */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/**
 * What the chats' own images may hold in memory together, from their reading until their turns
 * end (images/held.ts): a request of a few hundred bytes naming eight 20 MB files by `path` reads
 * 160 MB, so a burst of them must queue rather than grow the core without end.
 */
export const MAX_HELD_IMAGE_BYTES = 256 * 1024 * 1024;
/**
 * The most scans a JPEG may have (images/format.ts). llama-server's decoder (stb_image) passes
 * over every block of the image for each scan, however few bytes the scan has: a 20 KB
 * progressive JPEG of 200 empty refinement scans over 7000×7000 pixels took it 5.9 s of CPU,
 * 20 MB of them hours. libjpeg's standard progression writes 10; a baseline JPEG has 1 to 4.
 */
export const MAX_JPEG_SCANS = 100;
/** Base64 characters checked, then decoded, between two turns of the event loop (a multiple of 4: whole quads). */
export const BASE64_SLICE_CHARS = 1024 * 1024;

/**
 * The largest request body llama-server reads: its cpp-httplib's CPPHTTPLIB_PAYLOAD_MAX_LENGTH
 * (100 MiB; llama-server never raises it), a larger one answered 413 (docs/protocol.md#images).
 * Here, below llama/, because the images are budgeted by it; llama/data-url.ts refuses by it.
 */
export const LLAMA_MAX_BODY_BYTES = 100 * 1024 * 1024;

/**
 * Room kept in a request's body for everything but the images (the prompt's text, tools, a
 * schema): a context's text is a few MB at most.
 */
export const BODY_TEXT_RESERVE_BYTES = 4 * 1024 * 1024;

/**
 * What one request's images may take of its body, as base64 `data:` URLs: llama-server reads a
 * body of at most 100 MiB and answers a larger one 413, so a chat's images together (about 72 MiB
 * of image bytes) and the history's resent with them stay under it.
 */
export const IMAGE_BODY_BYTES = LLAMA_MAX_BODY_BYTES - BODY_TEXT_RESERVE_BYTES;

/** What an image takes of a request's body: its base64, with its `data:` prefix and JSON part. */
export function imageBodyBytes(image: { mime: string; bytes: number }): number {
  return Math.ceil(image.bytes / 3) * 4 + image.mime.length + 64;
}
