/**
 * The longest line a server may send: a whole JSON-RPC message, a tool's result included (the
 * SDK's own reader allows 10 MiB for everything unread; a 10 MB result with some escaping needs
 * more). A longer one ends the connection.
 */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

/**
 * A server's stdout cut into lines (one JSON-RPC message a line), in time linear in the bytes:
 * each chunk is searched once for newlines, and a line that spans chunks is copied into one
 * buffer that doubles as it grows (the SDK's ReadBuffer joins and searches the whole unread text
 * again for every chunk, which a line of megabytes turns into gigabytes of copying). Chunks are
 * not kept as they came: a server writing a byte at a time reaches the core as millions of
 * one-byte chunks, and keeping each cost about 175 bytes of heap (5.6 MB of a line held 310 MB: a
 * hostile review). How long the unfinished line is, is known at every chunk, so a line that
 * cannot be wanted is refused before it ends.
 */
export class LineReader {
  /** The unfinished line's bytes, in `buffer[0, partial)`. */
  private buffer: Uint8Array | undefined;
  private partial = 0;

  /** Bytes of the line not yet ended. */
  get pending(): number {
    return this.partial;
  }

  /** The lines `chunk` ends, the bytes before it joined in; throws past MAX_LINE_BYTES. */
  push(chunk: Uint8Array): Buffer[] {
    const lines: Buffer[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, start)) {
      if (this.partial === 0) lines.push(view(chunk.subarray(start, nl)));
      else {
        this.keep(chunk.subarray(start, nl));
        lines.push(view((this.buffer as Uint8Array).subarray(0, this.partial)));
        // The line handed out keeps that buffer: the next one gets its own.
        this.clear();
      }
      start = nl + 1;
    }
    if (start < chunk.length) this.keep(chunk.subarray(start));
    return lines;
  }

  clear(): void {
    this.buffer = undefined;
    this.partial = 0;
  }

  private keep(bytes: Uint8Array): void {
    const length = this.partial + bytes.length;
    if (length > MAX_LINE_BYTES) {
      this.clear();
      throw new Error(`a line longer than ${MAX_LINE_BYTES} bytes`);
    }
    if (this.buffer === undefined || this.buffer.length < length) {
      const size = Math.min(MAX_LINE_BYTES, Math.max(length, 2 * (this.buffer?.length ?? 0), MIN_BUFFER));
      const grown = new Uint8Array(size);
      if (this.buffer) grown.set(this.buffer.subarray(0, this.partial));
      this.buffer = grown;
    }
    this.buffer.set(bytes, this.partial);
    this.partial = length;
  }
}

/** The first buffer of a line that spans chunks. */
const MIN_BUFFER = 4096;

/** A Buffer over the same bytes, not a copy. */
const view = (a: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
