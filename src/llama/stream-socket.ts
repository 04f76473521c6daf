import { terminalText } from "../util/terminal-text.ts";
import type { PiecewiseBody } from "./data-url.ts";
import { ConnectionRefused, LlmError, statusError } from "./errors.ts";
import type { LlamaEndpoint } from "./http.ts";
import type { SocketHandlers, SpareConnection } from "./spare-connection.ts";

/**
 * The streamed completion's own HTTP/1.1 read, over a socket on the event loop. `fetch` hands
 * each network read from its HTTP thread to a ReadableStream on the JS thread; for a reply
 * streamed a token at a time that cost about 40 µs of CPU per piece on the project's VM, a
 * third of what the whole stream path spends (docs/performance.md, "Where a streamed piece's
 * CPU goes"). llama-server answers on 127.0.0.1 over plain HTTP/1.1 with a chunked body, so the
 * read is small: the status line and headers, then chunked, Content-Length or read-to-close
 * framing, each network read decoded as it comes, and what came since the last `read` handed on as
 * one piece of text. Every other call stays on `call`.
 */

/** A streamed 2xx answer's body as text: what arrived since the last read, as one piece. */
export interface BodyReader {
  /** The next piece; undefined once the body ended. Rejects when the connection fails or the signal aborts. */
  read(): Promise<string | undefined>;
  /**
   * Leaves what arrives in the kernel for `ms` (the socket is not read, so no wake per piece),
   * then reads on: what came meanwhile is the next `read`'s, in one piece. A failure or an abort
   * still ends the answer at once.
   */
  rest(ms: number): void;
  /** Closes the connection, which tells llama-server to stop the task (transcript 40). */
  close(): void;
}

/**
 * POSTs `body` (JSON) to `path` and resolves once the answer's head arrived: the body's reader
 * for a 2xx, else the status mapped to an LlmError (thrown). A refused connection is
 * ConnectionRefused, the signal's reason is thrown as it is. `onSent` runs once the whole
 * request has been handed to the kernel (the socket is on this thread, unlike fetch's, so
 * work meant to overlap llama-server's reading of the prompt must wait for that); what it
 * throws ends the request and is thrown as it is. `spare`, a connection opened ahead to the same
 * server (spare-connection.ts), is used in place of a new one when it can be.
 */
export function postStream(
  server: LlamaEndpoint,
  path: string,
  body: string | PiecewiseBody,
  signal: AbortSignal,
  onSent?: () => void,
  spare?: SpareConnection,
): Promise<BodyReader> {
  const url = new URL(server.baseUrl);
  const head = (length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${server.apiKey}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n` +
    `Connection: close\r\n\r\n`;
  // A body in pieces (an image's bytes: llama/data-url.ts) is written piece by piece as the
  // socket takes them, each made when it is its turn, never joined.
  const pieces: Iterator<Uint8Array> =
    typeof body === "string"
      ? [Buffer.from(head(Buffer.byteLength(body)) + body)].values()
      : (function* () {
          yield Buffer.from(head(body.byteLength));
          yield* body.pieces();
        })();
  const answer = new Answer(signal);
  if (signal.aborted) return Promise.reject(signal.reason);
  let piece: Uint8Array | undefined = pieces.next().value;
  let sent = 0;
  const send = (s: Bun.Socket<undefined>) => {
    if (piece === undefined) return;
    for (;;) {
      sent += Math.max(0, s.write(sent === 0 ? piece : piece.subarray(sent)));
      if (sent < piece.byteLength) return;
      sent = 0;
      piece = pieces.next().value;
      if (piece === undefined) break;
    }
    try {
      onSent?.();
    } catch (err) {
      answer.fail(err);
    }
  };
  const handlers: SocketHandlers = {
    open: (s) => {
      answer.attach(s);
      // The pieces go as written, not held back for the next (Nagle's wait on a small last piece).
      s.setNoDelay(true);
      send(s);
    },
    drain: send,
    data: (_s, bytes) => answer.bytes(bytes),
    close: () => answer.closed(),
    error: (_s, err) => answer.cutOff(`could not read llama-server's answer: ${err.message}`),
  };
  const connect = () =>
    Bun.connect({ hostname: url.hostname, port: Number(url.port || 80), socket: handlers }).catch(
      (err: NodeJS.ErrnoException) => {
        const why = `could not reach llama-server: ${err.message}`;
        answer.fail(err.code === "ECONNREFUSED" ? new ConnectionRefused(why) : lost(why));
      },
    );
  if (!spare?.take(server, handlers, connect)) void connect();
  return answer.head.promise;
}

const lost = (message: string) => new LlmError("connection_lost", message);
const LF = 10;
/** The decoder's options, one object for every read. */
const STREAM = { stream: true };
/** Longer than any chunk a local server sends: a size above it is garbage, not a wait for 4 GiB. */
const MAX_CHUNK = 0xffffffff;
/**
 * What is held while waiting for a line's end or an error's whole body, so that an answer that
 * never ends its head, a size line or an error body cannot grow the core's memory without bound.
 * llama-server's head is ~200 bytes, its size lines a few, its error bodies under 1 KiB.
 */
export const ANSWER_LIMITS = { headBytes: 64 * 1024, lineBytes: 1024, errorChars: 64 * 1024 };

/**
 * A chunk-size line's size, read from its hex digits up to the first other byte (`;` starts an
 * extension, `\r` ends the line), or -1 when it has none or names more than MAX_CHUNK. Read from
 * the bytes where they lie: a Buffer over each read's `.buffer` (which JSC makes on first asking)
 * and a latin1 string for parseInt were a share of every read in the CPU profile
 * (docs/performance.md, "Reasoning pieces against content pieces").
 */
export function chunkSize(b: Uint8Array, from: number, to: number): number {
  let size = 0;
  let i = from;
  for (; i < to; i++) {
    const c = b[i] as number;
    // 0-9, A-F, a-f (`| 32` folds upper case onto lower)
    const digit = c >= 48 && c <= 57 ? c - 48 : (c | 32) >= 97 && (c | 32) <= 102 ? (c | 32) - 87 : -1;
    if (digit < 0) break;
    size = size * 16 + digit;
    if (size > MAX_CHUNK) return -1;
  }
  return i === from ? -1 : size;
}

/** What an answer does with its connection. */
type Connection = Pick<Bun.Socket<undefined>, "end" | "terminate" | "pause" | "resume">;

/** One answer as it arrives: its head, then its body's text queued for `read`. */
class Answer implements BodyReader {
  readonly head = Promise.withResolvers<BodyReader>();
  private socket: Connection | undefined;
  private readonly decoder = new TextDecoder();
  /** Bytes of a head, or of a chunk-size line, still incomplete. */
  private carry: Uint8Array | undefined;
  private status = 0;
  private reason = "";
  private framing: "chunked" | "length" | "close" | undefined;
  /** Bytes left in the current chunk (chunked) or in the body (Content-Length). */
  private left = 0;
  /** A chunk's data ended and its CRLF is still to be skipped. */
  private afterChunk = false;
  private readonly queue: string[] = [];
  /** Characters of an error answer's body gathered so far. */
  private errorChars = 0;
  private waiter: PromiseWithResolvers<string | undefined> | undefined;
  /** The timer that ends a `rest`. */
  private resting: Timer | undefined;
  private ended = false;
  private failure: unknown;
  private readonly onAbort = () => this.fail(this.signal.reason);

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  attach(socket: Connection): void {
    this.socket = socket;
    if (this.failure !== undefined || this.ended) socket.terminate();
  }

  read(): Promise<string | undefined> {
    if (this.queue.length > 0) {
      // All that came while the reader was busy, as one piece: one parse and one line for it.
      const text = this.queue.length === 1 ? (this.queue[0] as string) : this.queue.join("");
      this.queue.length = 0;
      return Promise.resolve(text);
    }
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve(undefined);
    this.waiter = Promise.withResolvers();
    return this.waiter.promise;
  }

  rest(ms: number): void {
    if (this.resting !== undefined || this.ended || this.failure !== undefined || !this.socket) return;
    this.socket.pause();
    this.resting = setTimeout(() => {
      this.resting = undefined;
      this.socket?.resume();
    }, ms);
  }

  close(): void {
    this.fail(lost("the answer was closed"));
    this.socket?.terminate();
  }

  bytes(input: Uint8Array): void {
    if (this.ended || this.failure !== undefined) return;
    let b = input;
    if (this.carry) {
      b = new Uint8Array(this.carry.length + input.length);
      b.set(this.carry);
      b.set(input, this.carry.length);
      this.carry = undefined;
    }
    let text = "";
    let i = 0;
    if (this.framing === undefined) {
      i = this.readHead(b);
      if (i < 0) return;
    }
    while (i < b.length && !this.ended) {
      if (this.framing === "close" || (this.left > 0 && !this.afterChunk)) {
        const n = this.framing === "close" ? b.length - i : Math.min(this.left, b.length - i);
        text += this.decoder.decode(b.subarray(i, i + n), STREAM);
        i += n;
        if (this.framing === "close") continue;
        this.left -= n;
        if (this.left > 0) continue;
        if (this.framing === "length") this.ended = true;
        else this.afterChunk = true;
        continue;
      }
      // chunked: the CRLF after a chunk's data, or the next chunk's size line
      const nl = b.indexOf(LF, i);
      if ((nl < 0 ? b.length : nl) - i > ANSWER_LIMITS.lineBytes) {
        this.cutOff(
          `llama-server sent a malformed chunked body (a line over ${ANSWER_LIMITS.lineBytes} bytes)`,
          text,
        );
        return;
      }
      if (nl < 0) {
        this.carry = b.slice(i);
        break;
      }
      if (this.afterChunk) this.afterChunk = false;
      else {
        this.left = chunkSize(b, i, nl);
        if (this.left < 0) {
          this.cutOff("llama-server sent a malformed chunked body", text);
          return;
        }
        if (this.left === 0) this.ended = true;
      }
      i = nl + 1;
    }
    this.deliver(text);
  }

  /** The connection closed: the end of a read-to-close body, else an answer cut off. */
  closed(): void {
    if (this.ended || this.failure !== undefined) return;
    if (this.framing !== "close") {
      this.cutOff("llama-server closed the connection mid-answer");
      return;
    }
    this.ended = true;
    this.deliver("");
  }

  /**
   * The answer cut off or garbled past its head: `connection_lost`, unless the head was an error
   * status, which says what happened however little of its body came (as errors.ts `errorText`
   * reads a fetched one): an overflow's 400 cut short is not a lost server to restart. `read`: the
   * body this read held before it turned malformed, gathered with the rest (bounded as there).
   */
  cutOff(message: string, read = ""): void {
    if (this.status === 0 || (this.status >= 200 && this.status < 300)) {
      this.fail(lost(message));
      return;
    }
    this.deliver(read);
    this.fail(statusError(this.status, this.reason, this.queue.join("")));
  }

  /** Ends the answer with `err`, unless it already ended. */
  fail(err: unknown): void {
    if (this.failure === undefined && !this.ended) this.reject(err);
  }

  private reject(err: unknown): void {
    this.failure = err;
    this.head.reject(err);
    this.waiter?.reject(err);
    this.waiter = undefined;
    this.done();
    this.socket?.terminate();
  }

  /** The head's end (an index into `b`), or -1 while it is incomplete. */
  private readHead(b: Uint8Array): number {
    const buf = Buffer.from(b.buffer, b.byteOffset, b.length);
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0 && b.length > ANSWER_LIMITS.headBytes) {
      this.fail(lost(`llama-server's answer has no end of its head within ${ANSWER_LIMITS.headBytes} bytes`));
      return -1;
    }
    if (end < 0) {
      this.carry = b.slice();
      return -1;
    }
    const lines = buf.toString("latin1", 0, end).split("\r\n");
    const status = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(lines[0] as string);
    if (!status) {
      this.fail(
        lost(`llama-server answered something that is not HTTP: ${shown((lines[0] as string).slice(0, 80))}`),
      );
      return -1;
    }
    this.status = Number(status[1]);
    this.reason = status[2] ?? "";
    const headers = new Map(
      lines
        .slice(1)
        .map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
    );
    const length = headers.get("content-length");
    if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) this.framing = "chunked";
    else if (length === undefined) this.framing = "close";
    else if (!/^\d{1,15}$/.test(length)) {
      this.fail(lost(`llama-server's answer has a malformed Content-Length: ${shown(length.slice(0, 40))}`));
      return -1;
    } else [this.framing, this.left, this.ended] = ["length", Number(length), Number(length) === 0];
    if (this.status >= 200 && this.status < 300) this.head.resolve(this);
    return end + 4;
  }

  /** Hands a read's text on; an error answer is gathered whole and thrown as its LlmError. */
  private deliver(text: string): void {
    if (this.status < 200 || this.status >= 300) {
      // An error's message is in its first characters; a body past the limit is not waited for.
      const room = ANSWER_LIMITS.errorChars - this.errorChars;
      this.queue.push(text.length > room ? text.slice(0, room) : text);
      this.errorChars += Math.min(text.length, room);
      if (this.ended || text.length >= room)
        this.reject(statusError(this.status, this.reason, this.queue.join("")));
      return;
    }
    if (text !== "") {
      const waiter = this.waiter;
      this.waiter = undefined;
      if (waiter) waiter.resolve(text);
      else this.queue.push(text);
    }
    if (!this.ended) return;
    this.done();
    this.waiter?.resolve(undefined);
    this.waiter = undefined;
    this.socket?.end();
  }

  private done(): void {
    clearTimeout(this.resting);
    this.signal.removeEventListener("abort", this.onAbort);
  }
}

/**
 * Bytes of the answer (read as latin1) as a message quotes them: a byte 0x80-0x9f is a C1
 * control there, which JSON leaves raw; escaped as the log escapes it.
 */
const shown = (text: string): string => terminalText(JSON.stringify(text));
