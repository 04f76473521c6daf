import type { ImageInput } from "../protocol/image-input.ts";
import { abortable } from "../util/abortable.ts";
import { windowsDevicePath } from "../util/device-path.ts";
import { isFullPath } from "../util/full-path.ts";
import { decodeBase64Strict } from "./base64.ts";
import { type ImageFormat, MIME_OF, readImageHeader } from "./format.ts";
import { gifDataOverruns } from "./gif-data.ts";
import { readImageFile } from "./image-file.ts";
import { jpegScansOver } from "./jpeg-data.ts";
import { IMAGE_BODY_BYTES, imageBodyBytes, MAX_IMAGE_BYTES, MAX_JPEG_SCANS } from "./limits.ts";
import { pngDataBound, pngDataProblem } from "./png-data.ts";
import { imageRefused } from "./refusal.ts";

/** A chat's image, checked and ready to send and store. */
export interface PreparedImage {
  format: ImageFormat;
  /** From the bytes (the `mime` a host gave is not trusted). */
  mime: string;
  width: number;
  height: number;
  data: Uint8Array;
}

export interface ImageLimits {
  /** `app.max_images`. */
  maxImages: number;
  /** `app.max_image_pixels`. */
  maxPixels: number;
  /** What the images together may take of the request's body (IMAGE_BODY_BYTES; lowered by tests). */
  maxBodyBytes?: number;
  /** The room held for each image (images/held.ts `holdImages`): a file is read up to its own. */
  room?: readonly number[];
  /**
   * The chat's cancel: a `path`'s read is not waited for past it (a file on a network or cloud
   * drive gone offline may never answer; the read is left to end on its own).
   */
  signal?: AbortSignal;
  /** Each `path`'s read, so its room is held until it ends, past a cancel (images/held.ts). */
  track?: <T>(read: Promise<T>) => Promise<T>;
  /** A `path` read to so many bytes: its room past them is given back (images/held.ts). */
  readBytes?: (index: number, bytes: number) => void;
  /** Tests: a `path`'s read (image-file.ts). */
  readFile?: typeof readImageFile;
}

/**
 * A scheme before a colon: `http:`, `file:`, `data:`… A single letter is a Windows drive
 * (`C:\`), which only a `path` may start with.
 */
const URL_LIKE = /^\s*[A-Za-z][A-Za-z0-9+.-]+:/;

/**
 * The chat's images checked in order (docs/protocol.md#images), each read or decoded, its
 * format and size from its header, before anything is sent: the first problem refuses the chat,
 * naming `images[i]`. No URL is ever followed: llama-server would fetch an `http://` one itself
 * (test/fixtures/llama-server/transcripts/107). The loop is given back between images and within
 * a large base64 text, so validation never holds up a ping. The images together must fit the
 * body llama-server reads (limits.ts, IMAGE_BODY_BYTES): the one that crosses it is refused here,
 * before anything is staged, never sent to hear llama-server's 413.
 */
export async function prepareImages(
  inputs: readonly ImageInput[],
  limits: ImageLimits,
): Promise<PreparedImage[]> {
  if (inputs.length > limits.maxImages) {
    throw imageRefused(
      limits.maxImages,
      "too_many_images",
      `${inputs.length} images, over app.max_images (${limits.maxImages})`,
    );
  }
  const budget = limits.maxBodyBytes ?? IMAGE_BODY_BYTES;
  const out: PreparedImage[] = [];
  let body = 0;
  for (const [index, input] of inputs.entries()) {
    if (index > 0) await new Promise((r) => setImmediate(r));
    limits.signal?.throwIfAborted();
    const image = await prepareOne(index, input, limits);
    body += imageBodyBytes({ mime: image.mime, bytes: image.data.byteLength });
    if (body > budget)
      throw imageRefused(
        index,
        "too_large",
        `with the images before it, ${body} bytes of base64, over the ${budget} a request to llama-server has for images (its body is at most 100 MiB: about ${Math.floor((budget * 3) / 4 / 2 ** 20)} MiB of images a chat): send fewer or smaller images`,
      );
    out.push(image);
  }
  return out;
}

async function prepareOne(index: number, input: ImageInput, limits: ImageLimits): Promise<PreparedImage> {
  const bytes = await bytesOf(index, input, limits);
  if (bytes.length > MAX_IMAGE_BYTES)
    throw imageRefused(index, "too_large", `${bytes.length} bytes, over ${MAX_IMAGE_BYTES}`);
  const header = await readImageHeader(bytes);
  if (!header.ok)
    throw imageRefused(
      index,
      header.kind === "unsupported" ? "unsupported_format" : "damaged",
      header.problem,
    );
  const pixels = header.width * header.height;
  if (pixels > limits.maxPixels) {
    throw imageRefused(
      index,
      "too_many_pixels",
      `${header.width}×${header.height} pixels (${pixels}), over app.max_image_pixels (${limits.maxPixels})`,
    );
  }
  const problem = await dataProblem(bytes, header, limits.signal);
  if (problem !== undefined) throw imageRefused(index, "damaged", problem);
  return {
    format: header.format,
    mime: MIME_OF[header.format],
    width: header.width,
    height: header.height,
    data: bytes,
  };
}

/**
 * Why the image's data may not go to llama-server's decoder, though its header passed: a PNG or
 * GIF whose data stands for far more than its pixels (a decompression bomb), a JPEG of too many
 * scans, or a PNG's that zlib stops reading before its end. Each walks the data in slices.
 */
async function dataProblem(
  bytes: Uint8Array,
  header: { format: ImageFormat; width: number; height: number },
  signal?: AbortSignal,
): Promise<string | undefined> {
  const size = `${header.width}×${header.height}`;
  if (header.format === "jpeg")
    return (await jpegScansOver(bytes))
      ? `a JPEG of over ${MAX_JPEG_SCANS} scans: llama-server's decoder passes over the whole image for each`
      : undefined;
  if (header.format === "gif")
    return (await gifDataOverruns(bytes))
      ? `a GIF whose first frame's data decodes past its ${size} pixels many times over (a decompression bomb: llama-server's decoder walks every pixel it names)`
      : undefined;
  if (header.format !== "png") return undefined;
  const problem = await pngDataProblem(bytes, pngDataBound(bytes, header.width, header.height), signal);
  if (problem === "overrun")
    return `a PNG whose image data inflates past the ${size} pixels its header declares (a decompression bomb)`;
  if (problem !== undefined)
    return `a PNG whose image data zlib stops reading before its end (${problem}): llama-server's decoder would read on, to a size nothing bounds`;
  return undefined;
}

async function bytesOf(index: number, input: ImageInput, limits: ImageLimits): Promise<Uint8Array> {
  const { data, path, mime } = input;
  if ((data === undefined) === (path === undefined))
    throw imageRefused(index, "unreadable", "give either data (base64) or path, exactly one");
  if (mime !== undefined && !/^image\/[A-Za-z0-9.+-]+$/.test(mime))
    throw imageRefused(index, "unsupported_format", `mime ${JSON.stringify(mime)} is not an image type`);
  if (path !== undefined) {
    if (URL_LIKE.test(path))
      throw imageRefused(index, "url", "a URL is never followed: give a local file's path, or the data");
    if (!isFullPath(path)) throw imageRefused(index, "unreadable", `path must be absolute (${path})`);
    // A pipe's or a device's stat or open reaches it (a pipe's server is connected to): never tried.
    const device = windowsDevicePath(path);
    if (device) throw imageRefused(index, "unreadable", `path ${path} ${device}`);
    const read = (limits.readFile ?? readImageFile)(index, path, limits.room?.[index]);
    read.then((bytes) => limits.readBytes?.(index, bytes.length)).catch(() => {});
    const reading = limits.track ? limits.track(read) : read;
    return limits.signal ? abortable(reading, limits.signal) : reading;
  }
  const text = data as string;
  if (URL_LIKE.test(text))
    throw imageRefused(
      index,
      "url",
      "data must be the image's base64 alone: a URL (http:, file:, data:) is never followed",
    );
  // Base64 of the largest image, so a huge text is refused before it is read through.
  if (text.length > Math.ceil(MAX_IMAGE_BYTES / 3) * 4)
    throw imageRefused(index, "too_large", `${text.length} base64 characters, over ${MAX_IMAGE_BYTES} bytes`);
  const decoded = await decodeBase64Strict(text);
  if (!decoded.ok) throw imageRefused(index, "bad_base64", `data is not base64: ${decoded.problem}`);
  return decoded.bytes;
}
