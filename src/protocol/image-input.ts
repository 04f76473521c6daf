import { z } from "zod";

/**
 * One image of a chat (docs/protocol.md#images): base64 `data` (its `mime` optional: the bytes
 * decide) or a local `path` the core reads, never a URL. The shape only; what the image is, and
 * whether it may be sent, the core's `images/` decides, naming it `images[i]`.
 */
export const ImageInputSchema = z
  .object({
    data: z.string().optional(),
    mime: z.string().max(100).optional(),
    // Capped as a document's is: a megabyte of path came back whole in its refusal's message.
    path: z.string().max(4096).optional(),
  })
  .strict();
export type ImageInput = z.infer<typeof ImageInputSchema>;

/** The most any config may allow (`app.max_images` is checked against itself with the reason). */
export const IMAGES_HARD_MAX = 64;
