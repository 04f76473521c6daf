/**
 * Splits a byte stream into lines. Pure: it knows nothing of stdin. Splitting on the byte
 * 0x0A is safe for UTF-8 (it never occurs inside a multi-byte character), so characters
 * split across reads are decoded only once their line is complete.
 *
 * Every line is judged by the same rules whatever reads it arrived in (docs/protocol.md,
 * Framing): the limit counts the bytes received, without the line's `\n` or `\r\n`; one
 * leading byte order mark is dropped; a line of JSON whitespace (space, tab, CR) is blank and
 * skipped. Bytes that are not UTF-8 decode to U+FFFD.
 */
export type Frame = { kind: "line"; text: string } | { kind: "oversize"; bytes: number; head: string };

/**
 * How much of a too-long line is kept, decoded, with its size: enough for the `{"id":…` a reader
 * needs to tell whose line it lost (the client fails that call at once, not at its time limit).
 */
export const OVERSIZE_HEAD_BYTES = 256;

const LF = 0x0a;
const CR = 0x0d;
const BOM = 0xfeff;
const BLANK = /^[ \t\r]*$/;
const EMPTY = new Uint8Array(0);
/** A line buffer up to this size is kept for the next line; a bigger one is let go. */
const KEPT_BUFFER_BYTES = 64 * 1024;

export class LineSplitter {
  /**
   * The line begun so far, in `pending[0..pendingBytes)`. One buffer grown by doubling, not a
   * copy per chunk: a writer trickling a line a byte per read made each byte an array of its
   * own (about 240 bytes each in Node), a maxLineBytes line some 8 GB of the reader's memory.
   */
  private pending = EMPTY;
  private pendingBytes = 0;
  /** Bytes of a too-long line seen so far; the rest of it is skipped up to its newline. */
  private discarding = 0;
  /** The start of the line being discarded (OVERSIZE_HEAD_BYTES at most). */
  private discardHead = "";
  /** The last byte taken was CR: a discarded line's count leaves out its `\r\n`'s CR. */
  private lastWasCR = false;
  // ignoreBOM keeps a mark in the text, so every line drops its own, not only a read's first.
  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  constructor(public maxLineBytes: number) {}

  /** Feeds bytes, returns the frames they complete. Blank lines are skipped. */
  push(chunk: Uint8Array): Frame[] {
    const frames: Frame[] = [];
    let start = 0;
    if (this.pendingBytes > 0 || this.discarding > 0) {
      // First finish the line an earlier chunk began.
      const nl = chunk.indexOf(LF);
      if (nl === -1) {
        this.take(chunk);
        return frames;
      }
      this.take(chunk.subarray(0, nl));
      const frame = this.finishLine();
      if (frame) frames.push(frame);
      start = nl + 1;
    }
    const last = chunk.lastIndexOf(LF);
    if (last >= start) {
      this.wholeLines(chunk.subarray(start, last), frames);
      start = last + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
    return frames;
  }

  /** At end of input: a last line without a newline still counts. */
  end(): Frame[] {
    if (this.pendingBytes === 0 && this.discarding === 0) return [];
    const frame = this.finishLine();
    return frame ? [frame] : [];
  }

  /**
   * Lines wholly inside one chunk (`block` holds them without the last `\n`), decoded in one
   * call and split as text: cheaper than a decode per line, and a chunk is bounded by the
   * pipe's read size. Decoding never merges a `\n` into a bad sequence, so text lines match
   * byte lines one to one.
   */
  private wholeLines(block: Uint8Array, frames: Frame[]): void {
    const lines = this.decoder.decode(block).split("\n");
    let byteLengths: number[] | undefined;
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i]!;
      if (line.charCodeAt(line.length - 1) === CR) line = line.slice(0, -1);
      // A UTF-16 unit comes from at most 3 bytes (a U+FFFD from at most 3 bad ones), so only
      // long lines need their bytes counted, from the bytes themselves.
      if (line.length * 3 > this.maxLineBytes) {
        byteLengths ??= lineLengths(block);
        if (byteLengths[i]! > this.maxLineBytes) {
          frames.push({
            kind: "oversize",
            bytes: byteLengths[i]!,
            head: this.head([Buffer.from(line.slice(0, OVERSIZE_HEAD_BYTES))]),
          });
          continue;
        }
      }
      const frame = textFrame(line);
      if (frame) frames.push(frame);
    }
  }

  private take(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.lastWasCR = bytes[bytes.length - 1] === CR;
    if (this.discarding > 0) {
      this.discarding += bytes.length;
      return;
    }
    // One byte past the limit may be held: it can be the CR of a `\r\n`, which does not count.
    if (this.pendingBytes + bytes.length > this.maxLineBytes + 1) {
      // Drop what is held so memory stays bounded by the limit, and skip to the newline.
      this.discardHead = this.head([this.held(), bytes]);
      this.discarding = this.pendingBytes + bytes.length;
      this.release();
      return;
    }
    const needed = this.pendingBytes + bytes.length;
    if (needed > this.pending.length) {
      const grown = new Uint8Array(
        Math.min(Math.max(needed, this.pending.length * 2, 256), this.maxLineBytes + 1),
      );
      grown.set(this.held());
      this.pending = grown;
    }
    // Copied: the caller may reuse its buffer after push() returns.
    this.pending.set(bytes, this.pendingBytes);
    this.pendingBytes = needed;
  }

  /** The bytes of the line begun so far (a view, valid until the next take or release). */
  private held(): Uint8Array {
    return this.pending.subarray(0, this.pendingBytes);
  }

  /** Forgets the line begun; a big buffer goes with it, so a long line's room is not kept for good. */
  private release(): void {
    this.pendingBytes = 0;
    if (this.pending.length > KEPT_BUFFER_BYTES) this.pending = EMPTY;
  }

  /**
   * The first OVERSIZE_HEAD_BYTES of these parts, decoded; a character the cut splits is left out
   * (streamed: its bytes held back), where it read U+FFFD, a character the line never had.
   */
  private head(parts: readonly Uint8Array[]): string {
    const out = new Uint8Array(OVERSIZE_HEAD_BYTES);
    let n = 0;
    for (const p of parts) {
      if (n === out.length) break;
      const take = p.subarray(0, out.length - n);
      out.set(take, n);
      n += take.length;
    }
    return new TextDecoder().decode(out.subarray(0, n), { stream: true });
  }

  private finishLine(): Frame | null {
    if (this.discarding > 0) {
      const bytes = this.discarding - (this.lastWasCR ? 1 : 0);
      const head = this.discardHead;
      this.discarding = 0;
      this.discardHead = "";
      this.lastWasCR = false;
      return { kind: "oversize", bytes, head };
    }
    const line = this.held();
    this.lastWasCR = false;
    let len = line.length;
    if (len > 0 && line[len - 1] === CR) len--;
    // Decoded (or its head taken) before release(): `line` is a view of the buffer.
    const frame =
      len > this.maxLineBytes
        ? ({ kind: "oversize", bytes: len, head: this.head([line]) } as const)
        : textFrame(this.decoder.decode(line.subarray(0, len)));
    this.release();
    return frame;
  }
}

/** A decoded line without its ending: null when blank, else the line minus one leading BOM. */
function textFrame(raw: string): Frame | null {
  const line = raw.charCodeAt(0) === BOM ? raw.slice(1) : raw;
  if (line.length === 0 || (line.charCodeAt(0) <= 32 && BLANK.test(line))) return null;
  return { kind: "line", text: line };
}

/** Byte length of each line in `block` (split on `\n`), without a line's closing CR. */
function lineLengths(block: Uint8Array): number[] {
  const lengths: number[] = [];
  let from = 0;
  for (;;) {
    const nl = block.indexOf(LF, from);
    const end = nl === -1 ? block.length : nl;
    lengths.push(end > from && block[end - 1] === CR ? end - from - 1 : end - from);
    if (nl === -1) return lengths;
    from = nl + 1;
  }
}
