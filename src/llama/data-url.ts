import { LLAMA_MAX_BODY_BYTES } from "../images/limits.ts";
import { LlmError } from "./errors.ts";
import { wellFormedJson } from "./well-formed.ts";

/**
 * An image's bytes where a request's JSON wants a `data:` URL (test/fixtures/llama-server/
 * transcripts/101): kept as bytes until the request is written, then encoded to base64 a piece
 * at a time as the socket takes them, so a 20 MB image never becomes a 27 MB string, nor that
 * string a JSON text and a buffer of it (docs/performance.md, "Images"). `jsonBody` is the one
 * writer of such requests.
 */
export class DataUrl {
  constructor(
    readonly mime: string,
    readonly bytes: Uint8Array,
  ) {}

  /** In `jsonBody`'s text a placeholder it puts the URL at; written anywhere else, the URL itself. */
  toJSON(): string {
    if (!writing) return `data:${this.mime};base64,${Buffer.from(this.bytes).toString("base64")}`;
    const index = writing.found.get(this) ?? writing.found.size;
    writing.found.set(this, index);
    return `\u0000${writing.nonce}:${index}`;
  }
}

/** The images of the body `jsonBody` is stringifying (JSON.stringify runs to its end: one at a time). */
let writing: { found: Map<DataUrl, number>; nonce: string } | undefined;

/**
 * A request body written in pieces: its length first (Content-Length), then the pieces, made
 * as they are asked for. A piece may be overwritten by the next: the writer is done with one
 * before it asks for another.
 */
export interface PiecewiseBody {
  byteLength: number;
  pieces(): Generator<Uint8Array>;
}

export { LLAMA_MAX_BODY_BYTES };

/** Bytes encoded per piece (a multiple of 3, so the pieces' base64 joins without padding). */
const PIECE_BYTES = 3 * 256 * 1024;

/**
 * `value` as JSON: a string when it holds no DataUrl, else a body in pieces: the text around each
 * one, and the URL itself encoded piece by piece; one over `maxBytes` is refused as llama-server's
 * 413 is (errors.ts). A placeholder with a random part stands in for each while the rest is
 * stringified (no text of the request can match it).
 */
export function jsonBody(value: unknown, maxBytes = LLAMA_MAX_BODY_BYTES): string | PiecewiseBody {
  writing = { found: new Map(), nonce: crypto.randomUUID() };
  const { found: byUrl, nonce } = writing;
  let text: string;
  try {
    // Strings made well-formed (well-formed.ts); a plain stringify when they are, as a chat's body is.
    text = wellFormedJson(value);
  } finally {
    writing = undefined;
  }
  if (byUrl.size === 0) return text;
  const found = [...byUrl.keys()];
  // The text between the images, each with the quote and prefix (or quote) that joins it to them.
  const texts: Buffer[] = [];
  const urls: DataUrl[] = [];
  const mark = new RegExp(`"\\\\u0000${nonce}:(\\d+)"`, "g");
  let at = 0;
  let closing = "";
  for (const m of text.matchAll(mark)) {
    const url = found[Number(m[1])] as DataUrl;
    texts.push(Buffer.from(`${closing}${text.slice(at, m.index)}"data:${url.mime};base64,`, "utf8"));
    urls.push(url);
    closing = '"';
    at = m.index + m[0].length;
  }
  texts.push(Buffer.from(`${closing}${text.slice(at)}`, "utf8"));
  const base64Length = (n: number) => Math.ceil(n / 3) * 4;
  const byteLength =
    texts.reduce((n, t) => n + t.byteLength, 0) +
    urls.reduce((n, u) => n + base64Length(u.bytes.byteLength), 0);
  // The chat's images are budgeted before they are staged (images/prepare.ts) and the history's
  // resent within the rest (agent/turn/prompt-layout.ts): this refuses what still would not fit,
  // as llama-server would, without sending 100 MB to hear it.
  if (byteLength > maxBytes)
    throw new LlmError(
      "bad_response",
      `the request with its images would be ${byteLength} bytes, over the ${maxBytes} llama-server reads`,
      { status: 413, problem: "too_large" },
      413,
    );
  return {
    byteLength,
    *pieces() {
      // One buffer for every piece of base64: a 20 MB image leaves no 27 MB of buffers behind.
      const scratch = Buffer.allocUnsafe(base64Length(PIECE_BYTES));
      for (const [i, url] of urls.entries()) {
        yield texts[i] as Buffer;
        const bytes = Buffer.from(url.bytes.buffer, url.bytes.byteOffset, url.bytes.byteLength);
        for (let p = 0; p < bytes.length; p += PIECE_BYTES) {
          const n = scratch.write(bytes.subarray(p, p + PIECE_BYTES).toString("base64"), "latin1");
          yield scratch.subarray(0, n);
        }
      }
      yield texts[texts.length - 1] as Buffer;
    },
  };
}
