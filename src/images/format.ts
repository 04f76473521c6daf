import { nextTurn } from "../util/next-turn.ts";
/**
 * An image's format and size from its bytes, never its name or declared type
 * (docs/protocol.md#images): the formats llama-server decodes itself (PNG, JPEG, GIF, BMP);
 * WebP and the rest it hands to an external ffmpeg that a user's machine may not have
 * (test/fixtures/llama-server/transcripts/106d), so they are refused here with the reason.
 * Width and height come from the header, before anything decodes the pixels, so a small file
 * that declares a huge image (a decompression bomb) costs nothing to refuse. Pure, but for
 * the turns of the event loop it gives back within a long walk of a PNG's chunks or a JPEG's
 * segments (STEPS_A_SLICE).
 */

export type ImageFormat = "png" | "jpeg" | "gif" | "bmp";

export const MIME_OF: Record<ImageFormat, string> = {
  png: "image/png",
  jpeg: "image/jpeg",
  gif: "image/gif",
  bmp: "image/bmp",
};

/** What the header says, or why the bytes are not an image the model can read. */
export type ImageHeader =
  | { ok: true; format: ImageFormat; width: number; height: number }
  | { ok: false; kind: "unsupported" | "damaged"; problem: string };

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/**
 * Chunks, segments or fill bytes walked between two turns of the event loop: 20 MB of empty PNG
 * chunks is 1.75 million of them, of a JPEG's fill bytes 20 million, ~40 and ~100 ms of the
 * loop walked whole, ping unanswered.
 */
const STEPS_A_SLICE = 1 << 18;

export async function readImageHeader(bytes: Uint8Array): Promise<ImageHeader> {
  // No bytes is no image of any format: "send PNG or JPEG" would be the wrong advice.
  if (bytes.length === 0) return damaged("an empty file (0 bytes): there is no image in it");
  if (startsWith(bytes, PNG_SIGNATURE)) return png(bytes);
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return jpeg(bytes);
  if (ascii(bytes, 0, 6) === "GIF87a" || ascii(bytes, 0, 6) === "GIF89a") return gif(bytes);
  if (ascii(bytes, 0, 2) === "BM") return bmp(bytes);
  if (ascii(bytes, 0, 4) === "RIFF" && ascii(bytes, 8, 4) === "WEBP")
    return unsupported(
      "a WebP image: llama-server reads WebP only through an external ffmpeg, which it may not have (send PNG or JPEG)",
    );
  return unsupported("not a PNG, JPEG, GIF or BMP image (the format is known by the bytes, not the name)");
}

const unsupported = (problem: string): ImageHeader => ({ ok: false, kind: "unsupported", problem });
const damaged = (problem: string): ImageHeader => ({ ok: false, kind: "damaged", problem });
const sized = (format: ImageFormat, width: number, height: number): ImageHeader =>
  width > 0 && height > 0
    ? { ok: true, format, width, height }
    : damaged(`the ${format.toUpperCase()} header declares ${width}×${height} pixels`);

/** PNG chunk types as their four bytes read big-endian. */
const IHDR = 0x49484452;
const IDAT = 0x49444154;
const IEND = 0x49454e44;

/**
 * PNG: the IHDR chunk first (width, height), then every chunk's length walked to IEND: a chunk
 * that runs past the end, a missing IDAT or a missing IEND is a truncated or damaged file. The
 * chunks' CRCs are not checked (llama-server's decoder does that on the bytes it decodes). A
 * chunk's type is compared as a number, never made a string: 20 MB of empty chunks is 1.75
 * million of them, walked in a few milliseconds (docs/protocol.md#images).
 */
async function png(b: Uint8Array): Promise<ImageHeader> {
  if (b.length < 33 || u32be(b, 12) !== IHDR || u32be(b, 8) !== 13)
    return damaged("a PNG whose IHDR header is missing or cut short");
  const width = u32be(b, 16);
  const height = u32be(b, 20);
  let at = 8;
  let data = false;
  for (let steps = 1; ; steps++) {
    if (steps % STEPS_A_SLICE === 0) await nextTurn();
    if (at + 12 > b.length) return damaged("a truncated PNG: it ends before its IEND chunk");
    const length = u32be(b, at);
    const type = u32be(b, at + 4);
    if (at + 12 + length > b.length) {
      // Named only when its type is one (four letters): a length gone wrong lands in the pixels,
      // and the image's own bytes are never quoted into a refusal.
      const kind = ascii(b, at + 4, 4);
      return damaged(
        `a truncated PNG: ${/^[A-Za-z]{4}$/.test(kind) ? `its ${kind}` : "a"} chunk runs past the end`,
      );
    }
    if (type === IDAT) data = true;
    if (type === IEND) break;
    at += 12 + length;
  }
  if (!data) return damaged("a PNG with no image data (no IDAT chunk)");
  return sized("png", width, height);
}

/**
 * JPEG: the markers walked from SOI to the first frame header (SOFn: width, height); the file
 * ending, or the scan starting, before one is a damaged file. Bytes that are no marker after a
 * segment (a camera's padding) are skipped to the next 0xFF, as llama-server's decoder
 * (stb_image's decode_jpeg_header) scans past them; by `indexOf`, so 20 MB of them is one native
 * search. Its scans are counted after the header is read (jpeg-data.ts), in slices; the
 * entropy-coded data is not checked (llama-server's decoder reads it).
 */
async function jpeg(b: Uint8Array): Promise<ImageHeader> {
  let at = 2;
  for (let steps = 1; at + 4 <= b.length; steps++) {
    if (steps % STEPS_A_SLICE === 0) await nextTurn();
    if (b[at] !== 0xff) {
      // Never at SOI's heels: the caller saw 0xFF there, as stb_image needs a marker there.
      at = b.indexOf(0xff, at);
      if (at < 0) break;
      continue;
    }
    const marker = b[at + 1] as number;
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) break;
    const length = u16be(b, at + 2);
    if (length < 2) return damaged(`a JPEG with a broken segment at byte ${at}`);
    if (isFrameHeader(marker)) {
      if (at + 9 > b.length) break;
      // What stb_image's frame header takes: any other coding or depth it refuses (a 400, 106b).
      if (marker > 0xc2)
        return unsupported(
          `a JPEG coded as SOF${marker - 0xc0} (lossless, hierarchical or arithmetic-coded): llama-server's decoder reads baseline and progressive JPEGs only`,
        );
      if (b[at + 4] !== 8)
        return unsupported(`a ${b[at + 4]}-bit JPEG: llama-server's decoder reads 8-bit JPEGs only`);
      return sized("jpeg", u16be(b, at + 7), u16be(b, at + 5));
    }
    at += 2 + length;
  }
  return damaged("a JPEG that ends (or starts its scan) before its frame header");
}

/** SOF0–SOF15 but DHT (C4), JPG (C8) and DAC (CC), which share the range. */
const isFrameHeader = (m: number) => m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc;

/** GIF: the logical screen's width and height (llama-server decodes the first frame). */
function gif(b: Uint8Array): ImageHeader {
  if (b.length < 14) return damaged("a GIF cut short before its first block");
  return sized("gif", u16le(b, 6), u16le(b, 8));
}

/** BMP: the DIB header's size (core or info header), then the pixels' offset within the file. */
function bmp(b: Uint8Array): ImageHeader {
  if (b.length < 26) return damaged("a BMP whose header is cut short");
  const dib = u32le(b, 14);
  const pixelsAt = u32le(b, 10);
  if (pixelsAt >= b.length) return damaged("a truncated BMP: its pixels start past the end of the file");
  if (dib === 12) return sized("bmp", u16le(b, 18), u16le(b, 20));
  if (dib < 40 || b.length < 26) return damaged(`a BMP with an unknown header (${dib} bytes)`);
  // A negative height is a top-down image.
  return sized("bmp", Math.abs(i32le(b, 18)), Math.abs(i32le(b, 22)));
}

function startsWith(b: Uint8Array, prefix: readonly number[]): boolean {
  return prefix.every((v, i) => b[i] === v);
}

function ascii(b: Uint8Array, at: number, length: number): string {
  if (at + length > b.length) return "";
  return String.fromCharCode(...b.subarray(at, at + length));
}

const u16be = (b: Uint8Array, at: number) => ((b[at] as number) << 8) | (b[at + 1] as number);
const u16le = (b: Uint8Array, at: number) => (b[at] as number) | ((b[at + 1] as number) << 8);
const u32be = (b: Uint8Array, at: number) => u16be(b, at) * 0x10000 + u16be(b, at + 2);
const u32le = (b: Uint8Array, at: number) => u16le(b, at) + u16le(b, at + 2) * 0x10000;
const i32le = (b: Uint8Array, at: number) => u32le(b, at) | 0;
