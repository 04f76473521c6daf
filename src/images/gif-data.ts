/**
 * Whether a GIF's first frame (the one llama-server's decoder reads) decodes past its pixels: a
 * GIF's LZW codes each stand for a string of up to 4,096 pixels, and stb_image walks a code's
 * whole string for every code, even once the frame is full, so a 1×1 GIF whose data names a
 * long code again and again costs seconds of its CPU a megabyte (docs/protocol.md#images).
 * The codes are read here as stb_image reads them, only their strings' lengths kept, and the
 * walk stops once past the bound. Data it would refuse is left to it (its error is quick).
 */

/** Codes read between two turns of the event loop. */
const CODES_A_SLICE = 1 << 18;

/** Extension sub-blocks walked between two turns of the event loop. */
const BLOCKS_A_SLICE = 1 << 18;

/**
 * The first frame: its width and height, and where its LZW minimum code size is; or none. The
 * extensions before it are walked in slices: 20 MB of a comment's one-byte sub-blocks is 10
 * million steps, ~100 ms of the loop walked whole, ping unanswered.
 */
async function firstFrame(b: Uint8Array): Promise<{ width: number; height: number; at: number } | undefined> {
  const table = (flags: number) => (flags & 0x80 ? 3 << ((flags & 7) + 1) : 0);
  let at = 13 + table(b[10] ?? 0);
  let steps = 0;
  while (at < b.length) {
    const tag = b[at];
    if (tag === 0x2c) {
      if (at + 10 > b.length) return undefined;
      const width = (b[at + 5] as number) | ((b[at + 6] as number) << 8);
      const height = (b[at + 7] as number) | ((b[at + 8] as number) << 8);
      return { width, height, at: at + 10 + table(b[at + 9] as number) };
    }
    if (tag !== 0x21) return undefined;
    at += 2; // an extension: its label, then its sub-blocks to an empty one
    for (; at < b.length && b[at] !== 0; at += 1 + (b[at] as number))
      if (++steps % BLOCKS_A_SLICE === 0) await new Promise((r) => setImmediate(r));
    at++;
    if (++steps % BLOCKS_A_SLICE === 0) await new Promise((r) => setImmediate(r));
  }
  return undefined;
}

/**
 * True when the first frame's codes stand for more pixels than twice its own and a margin:
 * a real encoder writes each of them once.
 */
export async function gifDataOverruns(b: Uint8Array): Promise<boolean> {
  const frame = await firstFrame(b);
  if (!frame || frame.at >= b.length) return false;
  const bound = 2 * frame.width * frame.height + 65_536;
  const minimum = b[frame.at] as number;
  if (minimum > 12) return false;
  const clear = 1 << minimum;
  const lengths = new Int32Array(8193).fill(1);
  let at = frame.at + 1;
  let block = 0; // bytes left in the sub-block
  let bits = 0;
  let held = 0;
  let size = minimum + 1;
  let avail = clear + 2;
  let old = -1;
  let cleared = false;
  let total = 0;
  for (let n = 1; ; n++) {
    if (n % CODES_A_SLICE === 0) await new Promise((r) => setImmediate(r));
    while (held < size) {
      if (block === 0) {
        block = b[at++] ?? 0;
        if (block === 0) return false;
      }
      block--;
      bits |= (b[at++] ?? 0) << held;
      held += 8;
    }
    const code = bits & ((1 << size) - 1);
    bits >>>= size;
    held -= size;
    if (code === clear) {
      size = minimum + 1;
      avail = clear + 2;
      old = -1;
      cleared = true;
      continue;
    }
    if (code === clear + 1 || code > avail || !cleared) return false;
    if (old >= 0) {
      if (++avail > 8192) return false;
      lengths[avail - 1] = (lengths[old] as number) + 1;
    } else if (code === avail) return false;
    total += lengths[code] as number;
    if (total > bound) return true;
    if ((avail & ((1 << size) - 1)) === 0 && avail <= 0xfff) size++;
    old = code;
  }
}
