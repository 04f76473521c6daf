/**
 * The PDF filters besides Flate that `pdf-streams.ts` measures, each as pdf.js decodes it, with a
 * cap on what comes out (docs/agent.md "Documents"). With `keep` false only the length is counted
 * (the last filter of a chain: nothing is built); with it true the bytes are built, up to the cap,
 * for the next filter. Past the cap each answers "too_large".
 */
export type Decoded = { size: number; bytes?: Uint8Array } | "too_large";

/** Entries of an LZW table: codes are 12 bits at most. */
const TABLE = 4096;

/**
 * LZWDecode's output measured (and, when a filter follows it, built) as pdf.js decodes it
 * (docs/agent.md "Documents"). The codes are read high bit first, 9 bits wide at the start and
 * after a clear code (256), a bit wider each time the next free code plus EarlyChange reaches a
 * power of two, 12 at most; 257 ends the data. pdf.js keeps each entry's length in 16 bits and
 * keeps using the table once it is full, so one 12-bit code can stand for up to 65,535 bytes and
 * 300 KB decode to gigabytes. Counting needs the lengths alone. pdf.js builds a sequence in a
 * buffer of 4,096 bytes, so the bytes of a longer one past that are zeros: built the same here.
 */
export function lzwDecode(data: Uint8Array, earlyChange: number, cap: number, keep: boolean): Decoded {
  const length = new Uint16Array(TABLE);
  length.fill(1, 0, 256);
  // The bytes, kept only to build the output: what each entry extends, and the byte it adds.
  const prefix = keep ? new Uint16Array(TABLE) : undefined;
  const last = keep ? new Uint8Array(TABLE) : undefined;
  for (let c = 0; last && c < 256; c++) last[c] = c;
  let out: Uint8Array | undefined = keep ? new Uint8Array(Math.min(cap, 65_536)) : undefined;
  let size = 0;
  let width = 9;
  let free = 258;
  let prev = 0;
  let prevLength = 0; // 0 at the start and after a clear: no entry is made from the next code
  let lead = 0; // the first byte of the last sequence, as pdf.js's buffer holds it
  let bits = 0;
  let held = 0;
  let at = 0;
  for (;;) {
    while (held < width && at < data.length) {
      bits = ((bits << 8) | (data[at++] as number)) & 0xfffff;
      held += 8;
    }
    if (held < width) break; // the data ran out (pdf.js then adds at most 512 bytes more)
    held -= width;
    const code = (bits >>> held) & ((1 << width) - 1);
    if (code === 256) {
      width = 9;
      free = 258;
      prevLength = 0;
      continue;
    }
    if (code === 257) break;
    // A byte, an entry, or (a code not yet an entry) the previous sequence and its first byte.
    const n = code < 256 ? 1 : code < free ? (length[code] as number) : prevLength + 1;
    if (size + n > cap) return "too_large";
    if (out && prefix && last) {
      if (size + n > out.length) out = growTo(out, size, size + n, cap);
      if (code < 256) out[size] = code;
      else if (code < free) spell(out, size, code, n, prefix, last);
      else {
        out.copyWithin(size, size - prevLength, size);
        out[size + prevLength] = prevLength < TABLE ? lead : 0;
      }
      if (n > 0) lead = out[size] as number;
    }
    if (prevLength > 0) {
      // Writes past the table's end are dropped (a typed array's), as pdf.js's are.
      length[free] = (length[prev] as number) + 1;
      if (prefix && last) {
        prefix[free] = prev;
        last[free] = lead;
      }
      free++;
      const next = free + earlyChange;
      if ((next & (next - 1)) === 0) width = Math.min(32 - Math.clz32(next), 12);
    }
    prev = code;
    prevLength = n;
    size += n;
  }
  return out ? { size, bytes: out.subarray(0, size) } : { size };
}

/** An entry's `n` bytes at `at`, from its end back along what each extends; past 4,096 pdf.js has zeros. */
function spell(
  out: Uint8Array,
  at: number,
  code: number,
  n: number,
  prefix: Uint16Array,
  last: Uint8Array,
): void {
  for (let j = n - 1, q = code; j >= 0; j--, q = prefix[q] as number)
    out[at + j] = j < TABLE ? (last[q] as number) : 0;
}

/** RunLengthDecode: a length byte, then that many bytes (0–127: n + 1) or one repeated (129–255: 257 − n); 128 ends it. */
export function runLengthDecode(data: Uint8Array, cap: number, keep: boolean): Decoded {
  let size = 0;
  let out: Uint8Array | undefined = keep
    ? new Uint8Array(Math.min(cap, data.byteLength * 2 + 256))
    : undefined;
  for (let at = 0; at + 1 < data.byteLength; ) {
    const n = data[at] ?? 128;
    if (n === 128) break;
    const run = n < 128 ? Math.min(n + 1, data.byteLength - at - 1) : 257 - n;
    if (size + run > cap) return "too_large";
    if (out) {
      if (size + run > out.byteLength) out = growTo(out, size, size + run, cap);
      if (n < 128) out.set(data.subarray(at + 1, at + 1 + run), size);
      else out.fill(data[at + 1] ?? 0, size, size + run);
    }
    size += run;
    at += n < 128 ? run + 1 : 2;
  }
  return out ? { size, bytes: out.subarray(0, size) } : { size };
}

/** ASCIIHexDecode: never more than half its input, but the next filter needs the bytes. */
export function asciiHexDecode(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(data.byteLength / 2));
  let size = 0;
  let high = -1;
  for (const c of data) {
    if (c === 0x3e) break; // ">"
    const v =
      c >= 0x30 && c <= 0x39 ? c - 0x30 : (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 87 : -1;
    if (v < 0) continue;
    if (high < 0) high = v;
    else {
      out[size++] = (high << 4) | v;
      high = -1;
    }
  }
  if (high >= 0) out[size++] = high << 4;
  return out.subarray(0, size);
}

/** ASCII85Decode: at most 4 bytes a character ("z"), capped like the others. */
export function ascii85Decode(data: Uint8Array, cap: number): Decoded {
  let out: Uint8Array = new Uint8Array(Math.min(cap, data.byteLength + 64));
  let size = 0;
  let group = 0;
  let count = 0;
  const put = (word: number, bytes: number) => {
    if (size + bytes > out.byteLength) out = growTo(out, size, size + bytes, cap);
    for (let i = 0; i < bytes; i++) out[size++] = (word >>> (24 - 8 * i)) & 0xff;
  };
  for (const c of data) {
    if (c === 0x7e) break; // "~>"
    if (c === 0x7a && count === 0) {
      if (size + 4 > cap) return "too_large";
      put(0, 4);
    } else if (c >= 0x21 && c <= 0x75) {
      group = group * 85 + (c - 0x21);
      if (++count < 5) continue;
      if (size + 4 > cap) return "too_large";
      put(group >>> 0, 4);
      group = 0;
      count = 0;
    }
  }
  if (count > 1) {
    for (let i = count; i < 5; i++) group = group * 85 + 84;
    put(group >>> 0, count - 1);
  }
  return { size, bytes: out.subarray(0, size) };
}

/** A buffer grown (doubling, never past `cap`) to hold `need` bytes, its first `used` kept. */
function growTo(buf: Uint8Array, used: number, need: number, cap: number): Uint8Array {
  const bigger = new Uint8Array(Math.min(cap, Math.max(need, buf.byteLength * 2)));
  bigger.set(buf.subarray(0, used));
  return bigger;
}
