/**
 * The longest line a server may send: a whole JSON-RPC message, a tool's result included (the
 * SDK's own reader allows 10 MiB for everything unread; a 10 MB result with some escaping needs
 * more). A longer one ends the connection.
 */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

/**
 * A server's stdout cut into lines (one JSON-RPC message a line), in time linear in the bytes:
 * each chunk is searched once for newlines and a long line is joined once, when it ends (the
 * SDK's ReadBuffer joins and searches the whole unread text again for every chunk, which a
 * line of megabytes turns into gigabytes of copying). How long the unfinished line is, is known
 * at every chunk, so a line that cannot be wanted is refused before it ends.
 */
export class LineReader {
  private parts: Uint8Array[] = [];
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
      this.keep(chunk.subarray(start, nl));
      lines.push(this.parts.length === 1 ? view(this.parts[0] as Uint8Array) : Buffer.concat(this.parts));
      this.clear();
      start = nl + 1;
    }
    if (start < chunk.length) this.keep(chunk.subarray(start));
    return lines;
  }

  clear(): void {
    this.parts = [];
    this.partial = 0;
  }

  private keep(bytes: Uint8Array): void {
    this.partial += bytes.length;
    if (this.partial > MAX_LINE_BYTES) {
      this.clear();
      throw new Error(`a line longer than ${MAX_LINE_BYTES} bytes`);
    }
    this.parts.push(bytes);
  }
}

/** A Buffer over the same bytes, not a copy. */
const view = (a: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
