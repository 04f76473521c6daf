/**
 * Splits a byte stream into lines. Pure: it knows nothing of stdin. Splitting on the byte
 * 0x0A is safe for UTF-8 (it never occurs inside a multi-byte character), so characters
 * split across reads are decoded only once their line is complete.
 */
export type Frame = { kind: "line"; text: string } | { kind: "oversize"; bytes: number };

const LF = 0x0a;
const CR = 0x0d;

export class LineSplitter {
  private parts: Uint8Array[] = [];
  private pendingBytes = 0;
  /** Bytes of a too-long line seen so far; the rest of it is skipped up to its newline. */
  private discarding = 0;
  private readonly decoder = new TextDecoder("utf-8");

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
    // Every complete line left in the chunk is decoded in one go and split as text: cheaper
    // than a decode per line, and a chunk is bounded by the pipe's read size.
    const last = chunk.lastIndexOf(LF);
    if (last >= start) {
      const text = this.decoder.decode(chunk.subarray(start, last));
      for (const line of text.split("\n")) {
        const frame = this.textFrame(line);
        if (frame) frames.push(frame);
      }
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

  private take(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    if (this.discarding > 0) {
      this.discarding += bytes.length;
      return;
    }
    if (this.pendingBytes + bytes.length > this.maxLineBytes) {
      // Drop what is held so memory stays bounded by maxLineBytes, and skip to the newline.
      this.discarding = this.pendingBytes + bytes.length;
      this.parts = [];
      this.pendingBytes = 0;
      return;
    }
    // Copy: the caller may reuse its buffer after push() returns.
    this.parts.push(bytes.slice());
    this.pendingBytes += bytes.length;
  }

  private finishLine(): Frame | null {
    if (this.discarding > 0) {
      const bytes = this.discarding;
      this.discarding = 0;
      return { kind: "oversize", bytes };
    }
    let line: Uint8Array;
    if (this.parts.length === 1) line = this.parts[0]!;
    else {
      line = new Uint8Array(this.pendingBytes);
      let o = 0;
      for (const p of this.parts) {
        line.set(p, o);
        o += p.length;
      }
    }
    this.parts = [];
    this.pendingBytes = 0;
    return this.decodeLine(line);
  }

  private textFrame(raw: string): Frame | null {
    const line = raw.charCodeAt(raw.length - 1) === CR ? raw.slice(0, -1) : raw;
    // A UTF-16 unit is at most 3 UTF-8 bytes: only long lines need their bytes counted.
    if (line.length * 3 > this.maxLineBytes) {
      const bytes = Buffer.byteLength(line);
      if (bytes > this.maxLineBytes) return { kind: "oversize", bytes };
    }
    if (line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim() === "")) return null;
    return { kind: "line", text: line };
  }

  private decodeLine(line: Uint8Array): Frame | null {
    let len = line.length;
    if (len > 0 && line[len - 1] === CR) len--;
    const text = this.decoder.decode(line.subarray(0, len));
    if (text.trim() === "") return null;
    return { kind: "line", text };
  }
}
