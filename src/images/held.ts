import { stat } from "node:fs/promises";
import type { ImageInput } from "../protocol/image-input.ts";
import { ByteBudget } from "../util/byte-budget.ts";
import type { Release } from "../util/semaphore.ts";
import { MAX_HELD_IMAGE_BYTES, MAX_IMAGE_BYTES } from "./limits.ts";

/** The chats' images held in memory at once, by their sizes: the others wait their turn. */
export const heldImages = new ByteBudget(MAX_HELD_IMAGE_BYTES);

/**
 * Holds room for a chat's images before they are read, released when its turn ends
 * (docs/protocol.md#images): what each will take, a file by its size on disk and base64 by its
 * length, each at most MAX_IMAGE_BYTES. All at once, so two chats never each hold part of what
 * they need and wait on the other. More images than `maxImages` hold nothing: they are refused.
 */
export async function holdImages(
  inputs: readonly ImageInput[],
  maxImages: number,
  signal: AbortSignal,
): Promise<Release> {
  if (inputs.length > maxImages) return () => {};
  let bytes = 0;
  for (const input of inputs) bytes += Math.min(await expectedBytes(input), MAX_IMAGE_BYTES);
  return heldImages.acquire(bytes, signal);
}

async function expectedBytes(input: ImageInput): Promise<number> {
  if (typeof input.data === "string") return Math.floor((input.data.length * 3) / 4);
  if (typeof input.path !== "string") return 0;
  try {
    return (await stat(input.path)).size;
  } catch {
    // The reading refuses it, naming the image.
    return 0;
  }
}
