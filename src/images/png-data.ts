import { nextTurn } from "../util/next-turn.ts";

/**
 * Whether a PNG's image data inflates past what its header's size holds: a small file whose
 * IHDR says 1×1 and whose IDAT inflates to gigabytes passes the header's pixel check, and
 * llama-server's decoder (stb_image) inflates the whole stream into a buffer it doubles, up to
 * 4 GiB, before it finds the pixels do not match (docs/protocol.md#images). The stream is
 * inflated here off the loop, counted and thrown away, and stopped once past the bound. A stream
 * zlib stops reading before its end is refused too: stb_image is laxer (it ignores the header's
 * window size, so a `0x88` header zlib refuses at once it inflates whole: a 510 KB file to
 * 512 MB), and nothing says how far it would go. Only a stream read to its end is left to
 * llama-server's decoder whatever zlib says of it: a wrong checksum (stb_image never checks
 * it), or data cut short (counted as far as it goes).
 */

const IDAT = 0x49444154;
const IEND = 0x49454e44;

/** Samples a pixel holds by IHDR's colour type: grey, RGB, palette, grey+alpha, RGBA. */
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

/**
 * The most a `width`×`height` PNG's data may inflate to: each row's bytes and its filter byte,
 * doubled for Adam7 interlacing's seven passes (each pass's rows carry their own filter byte and
 * rounding) and a margin, so no real image comes near it while a bomb's ratio of thousands does.
 */
export function pngDataBound(bytes: Uint8Array, width: number, height: number): number {
  const depth = bytes[24] ?? 16;
  const channels = CHANNELS[bytes[25] ?? 6] ?? 4;
  const row = Math.ceil((width * channels * Math.max(depth, 1)) / 8) + 1;
  return 2 * row * height + 64 * 1024;
}

/** Chunks walked between two turns of the event loop. */
const CHUNKS_A_SLICE = 1 << 18;

/**
 * The IDAT chunks' data, joined (the header walk, format.ts, already found them whole). Walked
 * twice, sizing then copying, with no view per chunk: 20 MB of one-byte chunks is 1.5 million,
 * ~190 ms of the loop walked whole, so the loop is given back every CHUNKS_A_SLICE.
 */
export async function pngImageData(b: Uint8Array): Promise<Buffer> {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const walk = async (each: (at: number, length: number) => void) => {
    for (let at = 8, n = 1; at + 12 <= b.length; n++) {
      if (n % CHUNKS_A_SLICE === 0) await nextTurn();
      const length = view.getUint32(at);
      const type = view.getUint32(at + 4);
      if (type === IEND) break;
      if (type === IDAT) each(at + 8, Math.min(length, b.length - at - 8));
      at += 12 + length;
    }
  };
  let total = 0;
  await walk((_, length) => {
    total += length;
  });
  const out = Buffer.allocUnsafe(total);
  let filled = 0;
  await walk((at, length) => {
    // A view costs more than a few bytes' copy.
    if (length > 64) out.set(b.subarray(at, at + length), filled);
    else for (let i = 0; i < length; i++) out[filled + i] = b[at + i] as number;
    filled += length;
  });
  return out;
}

/**
 * Why the data may not be sent: it inflates past `bound` bytes (`overrun`), or zlib stopped
 * before its end (its reason, as zlib says it); undefined when neither. A `signal` aborted stops
 * the inflating (seconds for a large 16-bit image), throwing its reason: a cancelled chat's
 * answer waited for all of it.
 */
export async function pngDataProblem(
  bytes: Uint8Array,
  bound: number,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const data = await pngImageData(bytes);
  // node:zlib on first use: evaluated with the turn's modules it cost a cold first chat ~9 ms of
  // CPU, and a chat without a PNG never needs it (docs/performance.md).
  const { createInflate } = await import("node:zlib");
  signal?.throwIfAborted();
  const { promise, resolve, reject } = Promise.withResolvers<string | undefined>();
  const inflate = createInflate();
  let out = 0;
  const aborted = () => {
    reject(signal?.reason);
    inflate.destroy();
  };
  signal?.addEventListener("abort", aborted, { once: true });
  const finish = (problem: string | undefined) => {
    signal?.removeEventListener("abort", aborted);
    resolve(problem);
    inflate.destroy();
  };
  inflate.on("data", (chunk: Buffer) => {
    out += chunk.length;
    if (out > bound) finish("overrun");
  });
  inflate.on("error", (err: Error & { code?: string }) =>
    finish(err.code === "Z_BUF_ERROR" || /incorrect data check/.test(err.message) ? undefined : err.message),
  );
  inflate.on("end", () => finish(undefined));
  inflate.end(data);
  return promise;
}
