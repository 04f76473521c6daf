import { nextTurn } from "../util/next-turn.ts";
import { terminalText } from "../util/terminal-text.ts";
import { cutText } from "../util/text-cut.ts";
import { ENTRY_STEPS, Pauses } from "./scan-pauses.ts";

/**
 * Reads a GGUF header the way the planner needs it: scalar metadata, small numeric arrays, and
 * the tensor table, while big arrays (the vocabulary, its scores and types: 30k–250k entries)
 * are stepped over and only counted. `@huggingface/gguf` decodes every vocabulary string into a
 * JS array first, which was most of a cold chat's plan time (20–40 ms for a 32k vocabulary,
 * docs/performance.md "Chat overhead"); the library stays the reader for remote headers, where
 * the network dominates. The result matches the library's on every file the tests hold.
 *
 * Pure over a byte source: `readAt(position, length)` returns up to `length` bytes (fewer only at
 * the end of the file), so tests can hand it any buffer.
 */

export type ScannedValue = number | string | boolean | number[] | { array_length: number };

export interface ScannedGguf {
  version: number;
  littleEndian: boolean;
  /** Keys as the library names them, `version`, `tensor_count` and `kv_count` included. */
  metadata: Record<string, ScannedValue>;
  tensorInfos: { name: string; shape: number[]; dtype: number; offset: number }[];
  tensorDataOffset: number;
}

/** Ran out of bytes: the file ends inside its header. */
export class GgufTruncated extends Error {}
/** The bytes are not a header this reader understands. */
export class GgufInvalid extends Error {}

/** Numeric arrays up to this length keep their values (per-layer head counts); longer ones are counted. */
export const KEEP_ARRAY_MAX = 4096;
/**
 * What a header may hold in memory, its sizes being the file's word: a string's length or an
 * array's is read whole, and a sparse file of a terabyte costs no disk. A string value past
 * KEEP_STRING_MAX (chat templates are tens of KiB; `tokenizer.huggingface.json`, a whole
 * tokenizer, megabytes the planner never reads) is stepped over and left out, as is any value
 * once KEEP_BYTES_MAX of them is kept; a key's or tensor's name past MAX_NAME (llama.cpp's
 * own limit for a tensor's is 63 bytes) is no model's. An 8 GiB string was read in one piece.
 */
const KEEP_STRING_MAX = 1 << 20;
const KEEP_BYTES_MAX = 16 << 20;
const MAX_NAME = 1 << 10;
/**
 * Entries of arrays of strings or of arrays stepped over, in all: each is a loop's turn, and
 * a count of 2^40 over a sparse file of zeros (strings of length 0) held the loop for hours.
 * The largest vocabularies (262k tokens, their scores, types and merges) are a few million.
 */
const MAX_STEPPED = 1 << 24;
// Real models have a few thousand tensors and about a hundred keys; a million of either was read
// on the loop for most of a second (docs/plan.md).
const MAX_TENSORS = 1 << 16;
const MAX_KV = 1 << 16;
const MAX_DIMS = 8;
const MAX_NESTING = 8;
const DEFAULT_ALIGNMENT = 32;

/** GGUF value types (gguf.md in llama.cpp). */
const T = {
  U8: 0,
  I8: 1,
  U16: 2,
  I16: 3,
  U32: 4,
  I32: 5,
  F32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  U64: 10,
  I64: 11,
  F64: 12,
} as const;

const FIXED_SIZE: Record<number, number> = {
  [T.U8]: 1,
  [T.I8]: 1,
  [T.U16]: 2,
  [T.I16]: 2,
  [T.U32]: 4,
  [T.I32]: 4,
  [T.F32]: 4,
  [T.BOOL]: 1,
  [T.U64]: 8,
  [T.I64]: 8,
  [T.F64]: 8,
};

export type ReadAt = (position: number, length: number) => Uint8Array;

/** A forward cursor over `readAt`, refilling a window as it goes (headers are read front to back). */
class Cursor {
  private buf: Uint8Array = new Uint8Array(0);
  private view: DataView = new DataView(this.buf.buffer);
  private base = 0;
  pos = 0;
  littleEndian = true;

  constructor(
    private readonly readAt: ReadAt,
    private readonly window: number,
  ) {}

  private need(n: number): number {
    const at = this.pos - this.base;
    if (at >= 0 && at + n <= this.buf.length) return at;
    const bytes = this.readAt(this.pos, Math.max(n, this.window));
    if (bytes.length < n)
      throw new GgufTruncated(`the header ends early, at byte ${this.pos + bytes.length}`);
    this.buf = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.base = this.pos;
    return 0;
  }

  u8(): number {
    const at = this.need(1);
    this.pos += 1;
    return this.view.getUint8(at);
  }
  u32(): number {
    const at = this.need(4);
    this.pos += 4;
    return this.view.getUint32(at, this.littleEndian);
  }
  u64(): number {
    const at = this.need(8);
    this.pos += 8;
    // Two halves, not a BigInt: this runs once per vocabulary string.
    const le = this.littleEndian;
    const lo = this.view.getUint32(le ? at : at + 4, le);
    const hi = this.view.getUint32(le ? at + 4 : at, le);
    if (hi >= 0x200000) throw new GgufInvalid(`a size over 2^53 at byte ${this.pos - 8}`);
    return hi * 0x100000000 + lo;
  }
  scalar(type: number): number | boolean {
    const size = FIXED_SIZE[type]!;
    const at = this.need(size);
    this.pos += size;
    const v = this.view;
    const le = this.littleEndian;
    switch (type) {
      case T.U8:
        return v.getUint8(at);
      case T.I8:
        return v.getInt8(at);
      case T.U16:
        return v.getUint16(at, le);
      case T.I16:
        return v.getInt16(at, le);
      case T.U32:
        return v.getUint32(at, le);
      case T.I32:
        return v.getInt32(at, le);
      case T.F32:
        return v.getFloat32(at, le);
      case T.BOOL:
        return v.getUint8(at) !== 0;
      case T.U64:
        return Number(v.getBigUint64(at, le));
      case T.I64:
        return Number(v.getBigInt64(at, le));
      default:
        return v.getFloat64(at, le);
    }
  }
  bytes(n: number): Uint8Array {
    const at = this.need(n);
    this.pos += n;
    return this.buf.subarray(at, at + n);
  }
  skip(n: number): void {
    this.pos += n;
  }
  /**
   * Steps over `count` length-prefixed strings: one tight loop, as a vocabulary has 30k–250k. A
   * plain function: a pause check inside it, a generator's, cost ~9% of a vocabulary's scan.
   */
  skipStrings(count: number): void {
    const le = this.littleEndian;
    for (let i = 0; i < count; i++) {
      const at = this.need(8);
      const lo = this.view.getUint32(le ? at : at + 4, le);
      const hi = this.view.getUint32(le ? at + 4 : at, le);
      if (hi >= 0x200000) throw new GgufInvalid(`a size over 2^53 at byte ${this.pos}`);
      this.pos += 8 + hi * 0x100000000 + lo;
    }
  }
}

const utf8 = new TextDecoder();

/** The scan in one go: what a caller off the main loop, or over bytes it holds, uses. */
export function scanGguf(readAt: ReadAt, window = 1 << 20): ScannedGguf {
  const steps = scanSteps(readAt, window);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** The scan with a turn of the event loop at each pause: a header's counts are the file's word. */
export async function scanGgufSliced(readAt: ReadAt, window = 1 << 20): Promise<ScannedGguf> {
  const steps = scanSteps(readAt, window);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await nextTurn();
  }
}

/** The scan, pausing (a bare `yield`) every so many entries; its value the header. */
function* scanSteps(readAt: ReadAt, window: number): Generator<undefined, ScannedGguf> {
  const c = new Cursor(readAt, window);
  const version = versionOf(c);
  const size = () => c.u64();
  const name = () => {
    const length = size();
    if (length > MAX_NAME) throw new GgufInvalid(`a name of ${length} bytes at byte ${c.pos}`);
    return utf8.decode(c.bytes(length));
  };
  let keep = KEEP_BYTES_MAX;
  const { tensorCount, kvCount } = countsOf(c);
  const metadata: Record<string, ScannedValue> = { version, tensor_count: tensorCount, kv_count: kvCount };

  let stepped = MAX_STEPPED;
  const pauses = new Pauses();
  /** Steps over `count` values of `type` (nested arrays included). */
  function* skipValues(type: number, count: number, depth = 1): Generator<undefined, void> {
    // Arrays of arrays exist (rarely, shallow); a file nesting them without end is not a model.
    if (depth > MAX_NESTING) throw new GgufInvalid(`arrays nested more than ${MAX_NESTING} deep`);
    const fixed = FIXED_SIZE[type];
    if (fixed !== undefined) {
      c.skip(fixed * count);
      return;
    }
    if (count > stepped)
      throw new GgufInvalid(`arrays of ${count} entries at byte ${c.pos}, more entries than any vocabulary`);
    stepped -= count;
    if (type === T.STRING) yield* skipStringsPaused(c, count, pauses);
    else
      for (let i = 0; i < count; i++) {
        if (pauses.spend(ENTRY_STEPS)) yield;
        yield* skipValues(checkedType(c.u32()), size(), depth + 1);
      }
  }
  /** The value, or undefined for a string stepped over (KEEP_STRING_MAX). */
  function* value(type: number): Generator<undefined, ScannedValue | undefined> {
    if (type === T.STRING) {
      const length = size();
      if (length > Math.min(KEEP_STRING_MAX, keep)) return void c.skip(length);
      keep -= length;
      return utf8.decode(c.bytes(length));
    }
    if (type !== T.ARRAY) return c.scalar(type);
    const elem = checkedType(c.u32());
    const count = size();
    if (count === 0) return []; // as the library gives an empty array of any type
    const numeric = FIXED_SIZE[elem] !== undefined && elem !== T.BOOL;
    if (!numeric || count > KEEP_ARRAY_MAX || count * 8 > keep) {
      yield* skipValues(elem, count);
      return { array_length: count };
    }
    keep -= count * 8;
    const out: number[] = new Array(count);
    for (let i = 0; i < count; i++) out[i] = c.scalar(elem) as number;
    return out;
  }

  // llama.cpp's reader refuses a key or a tensor name given twice: the plan read the last one.
  const keys = new Set<string>();
  for (let i = 0; i < kvCount; i++) {
    if (pauses.spend(ENTRY_STEPS)) yield;
    const key = name();
    if (keys.has(key)) throw new GgufInvalid(`the key ${quotedName(key)} is given twice`);
    keys.add(key);
    const type = checkedType(c.u32());
    // llama.cpp reads it as a u32 only: another type aborts llama-server (GGML_ASSERT) at load.
    if (key === "general.alignment" && type !== T.U32)
      throw new GgufInvalid(`general.alignment is of type ${type}, not a u32 (type 4)`);
    const v = yield* value(type);
    if (v !== undefined) metadata[key] = v;
  }

  const tensorInfos = yield* tensorTable(c, tensorCount, name, size, pauses);

  const alignment = alignmentOf(metadata);
  const tensorDataOffset = Math.ceil(c.pos / alignment) * alignment;
  return { version, littleEndian: c.littleEndian, metadata, tensorInfos, tensorDataOffset };
}

/** `count` strings stepped over through the plain loop, paused between its slices (docs/performance.md). */
function* skipStringsPaused(c: Cursor, count: number, pauses: Pauses): Generator<undefined, void> {
  for (let left = count; left > 0; ) {
    const n = Math.min(left, pauses.room());
    c.skipStrings(n);
    left -= n;
    if (pauses.spend(n)) yield;
  }
}

/** The header's tensor and key counts, each within what a model has. */
function countsOf(c: Cursor): { tensorCount: number; kvCount: number } {
  const tensorCount = c.u64();
  if (tensorCount > MAX_TENSORS) throw new GgufInvalid(`a tensor count of ${tensorCount}`);
  const kvCount = c.u64();
  if (kvCount > MAX_KV) throw new GgufInvalid(`a metadata count of ${kvCount}`);
  return { tensorCount, kvCount };
}

/** The magic bytes, then the version: one llama.cpp reads, or GgufInvalid naming it. */
function versionOf(c: Cursor): number {
  const magic = c.bytes(4);
  if (utf8.decode(magic) !== "GGUF") throw new GgufInvalid("it does not start with the GGUF magic bytes");
  const version = c.u32();
  // The version's low half is never zero in the byte order the file was written in.
  const swapped = version !== 0 && (version & 0xffff) === 0;
  const wrong = versionProblem(swapped ? byteSwapped(version) : version, !swapped);
  if (wrong) throw new GgufInvalid(wrong);
  return version;
}

const byteSwapped = (n: number): number =>
  (((n & 0xff) << 24) | ((n & 0xff00) << 8) | ((n >>> 8) & 0xff00) | (n >>> 24)) >>> 0;

/**
 * Why llama.cpp's reader (gguf.cpp) refuses a file of this version and byte order, or
 * undefined: it reads versions 2 and 3, little-endian only on the little-endian machines a
 * llama-server runs on. A version 1 or a big-endian file was planned as fitting, and
 * llama-server then refused to load it.
 */
export function versionProblem(version: number, littleEndian: boolean): string | undefined {
  if (!littleEndian)
    return `it is a big-endian GGUF (version ${version} read byte-swapped), which llama.cpp does not read on a little-endian machine`;
  if (version === 1) return "it is GGUF version 1, which llama.cpp no longer reads: convert the model again";
  if (version < 2 || version > 3)
    return `it is GGUF version ${version}, where llama.cpp reads versions 2 and 3`;
  return undefined;
}

/** The tensor table: each tensor's name, shape, type and offset (its data is never read). */
function* tensorTable(
  c: Cursor,
  count: number,
  name: () => string,
  size: () => number,
  pauses: Pauses,
): Generator<undefined, ScannedGguf["tensorInfos"]> {
  const tensorInfos: ScannedGguf["tensorInfos"] = new Array(count);
  const names = new Set<string>();
  for (let i = 0; i < count; i++) {
    if (pauses.spend(ENTRY_STEPS)) yield;
    const tensor = name();
    if (names.has(tensor)) throw new GgufInvalid(`the tensor ${quotedName(tensor)} is given twice`);
    names.add(tensor);
    const dims = c.u32();
    if (dims > MAX_DIMS) throw new GgufInvalid(`the tensor ${quotedName(tensor)} has ${dims} dimensions`);
    const shape: number[] = new Array(dims);
    for (let d = 0; d < dims; d++) shape[d] = size();
    const dtype = c.u32();
    const offset = c.u64();
    tensorInfos[i] = { name: tensor, shape, dtype, offset };
  }
  return tensorInfos;
}

/**
 * Where tensor data starts is a multiple of this. llama.cpp's reader refuses a file whose
 * `general.alignment` is not a power of two (gguf.cpp): the plan had said such a file fits.
 */
export function alignmentOf(metadata: Record<string, unknown>): number {
  const alignment = metadata["general.alignment"] ?? DEFAULT_ALIGNMENT;
  const power = typeof alignment === "number" && alignment >= 1 && alignment <= 2 ** 31;
  if (!power || (alignment & (alignment - 1)) !== 0)
    throw new GgufInvalid(`general.alignment must be a power of two, got ${JSON.stringify(alignment)}`);
  return alignment;
}

/**
 * A name from the file as a message quotes it: its start only, cut between characters, escaped
 * as JSON and then as the log escapes what JSON leaves raw (bidi overrides, C1 controls, U+2028).
 */
export const quotedName = (name: string): string => terminalText(JSON.stringify(cutText(name, 80)));

function checkedType(type: number): number {
  if (type > T.F64) throw new GgufInvalid(`value type ${type}`);
  return type;
}
