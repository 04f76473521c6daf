import { openFilesUsedUp } from "../protocol/errors.ts";
import { FileTooLarge, NotRegularFile, readFailure, readFileBytesAsync } from "../util/read-file.ts";
import { MAX_IMAGE_BYTES } from "./limits.ts";
import { imageRefused } from "./refusal.ts";

/**
 * An image given by `path`: read as `util/read-file.ts` reads what the user controls (a regular
 * file only, opened without blocking, so a FIFO never hangs the core; links followed), its size
 * checked by stat before a byte is read, the reads awaited. Every failure is a refusal naming
 * `images[i]` and the path (but the core's own open files used up, EMFILE: no fault of the file). `room`: the bytes its chat holds for it (images/held.ts), never
 * read past: a file grown since is refused as `unreadable`.
 */
export async function readImageFile(
  index: number,
  path: string,
  room = MAX_IMAGE_BYTES,
): Promise<Uint8Array> {
  const max = Math.min(room, MAX_IMAGE_BYTES);
  try {
    return await readFileBytesAsync(path, max);
  } catch (err) {
    if (err instanceof FileTooLarge && err.bytes <= MAX_IMAGE_BYTES)
      throw imageRefused(
        index,
        "unreadable",
        `${path} grew past the ${max} bytes it had when the chat took its room in memory (a file still being written?): send it again once it is complete`,
      );
    if (err instanceof FileTooLarge)
      throw imageRefused(index, "too_large", `${path} is ${err.bytes} bytes, over ${MAX_IMAGE_BYTES}`);
    if (err instanceof NotRegularFile)
      throw imageRefused(index, "unreadable", `${path} is ${err.kind}, not a file`);
    const ours = openFilesUsedUp(err, `params.images[${index}]: ${path} cannot be read now`);
    if (ours) throw ours;
    throw imageRefused(index, "unreadable", `${path} cannot be read: ${readFailure(err)}`);
  }
}
