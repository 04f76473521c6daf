import { EventEmitter } from "node:events";
import { PassThrough, Writable } from "node:stream";
import type { LocalAiClientOptions } from "../../src/client/index.ts";

/**
 * An in-process stand-in for the core's ChildProcess, handed to the client through its `spawn`
 * seam: it answers initialize, hands other requests to the test, and can fall mute (stdout
 * closed), stop reading its stdin, or ignore end of input, on cue. Bun's child_process does not
 * report a pipe closed by a child that runs on, so a real process cannot show the first here.
 */

export interface FakeRequest {
  id: string;
  method: string;
  params: Record<string, unknown>;
}

export class FakeChild extends EventEmitter {
  readonly pid = 2_000_000_000;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: Writable;
  readonly requests: FakeRequest[] = [];
  readonly signals: string[] = [];
  /** Bytes of stdin it has read. */
  bytesRead = 0;
  stdinEnded = false;
  exited = false;
  /** Set false to stop reading stdin: writes stay queued on the client's side. */
  reading = true;
  /** Set by closeInput(): the next write fails with EPIPE, as Node reports a closed pipe. */
  inputClosed = false;
  /** How long it takes over each write it reads (a busy core reading slowly). */
  readDelayMs = 0;
  /** Set to answer initialize with this error code instead of a result. */
  initError: string | undefined;
  /** Set to answer initialize with this result instead of a well-formed one. */
  initResult: unknown = INIT_RESULT;
  /** Exit (code 0) on end of input, as the real core does. */
  exitOnEof = true;
  /** How long that exit takes (stopping llama-server first, as the real core does). */
  eofExitDelayMs = 0;
  private partial = "";

  constructor(private readonly onRequest: (req: FakeRequest, child: FakeChild) => void = () => {}) {
    super();
    this.stdin = new Writable({
      // One write at a time: while not reading, the callback is never called, so the rest queue.
      write: (chunk: Buffer, _enc, done) => {
        if (this.inputClosed) return done(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
        if (!this.reading) return;
        const read = () => {
          this.bytesRead += chunk.length;
          this.take(String(chunk));
          done();
        };
        if (this.readDelayMs > 0) setTimeout(read, this.readDelayMs);
        else read();
      },
      final: (done) => {
        this.stdinEnded = true;
        done();
        if (this.exitOnEof) setTimeout(() => this.exit(0, null), this.eofExitDelayMs);
      },
    });
    this.stdin.on("error", () => {});
  }

  /** The `spawn` option that hands this child to the client. */
  get spawn(): LocalAiClientOptions["spawn"] {
    return () => this;
  }

  send(msg: Record<string, unknown>): void {
    if (this.stdout.writable) this.stdout.write(`${JSON.stringify(msg)}\n`);
  }

  /** Closes its stdout and runs on. */
  mute(): void {
    this.stdout.end();
  }

  /** Closes its stdin and runs on: what is written to it next fails with EPIPE. */
  closeInput(): void {
    this.inputClosed = true;
  }

  kill(signal = "SIGTERM"): boolean {
    this.signals.push(signal);
    if (signal === "SIGKILL") this.exit(null, "SIGKILL");
    return true;
  }

  exit(code: number | null, signal: string | null): void {
    if (this.exited) return;
    this.exited = true;
    this.stdout.end();
    this.stderr.end();
    setImmediate(() => this.emit("exit", code, signal));
  }

  private take(text: string): void {
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      const req = JSON.parse(line) as FakeRequest;
      if (req.method === "initialize" && this.initError)
        this.send({ id: req.id, type: "error", code: this.initError, message: "initialize refused" });
      else if (req.method === "initialize")
        this.send({ id: req.id, type: "result", result: this.initResult });
      else {
        this.requests.push(req);
        this.onRequest(req, this);
      }
    }
  }
}

const INIT_RESULT = {
  protocol_version: 1,
  server: { name: "fake-child", version: "0.0.0" },
  capabilities: {
    parallel_chat: { supported: false, max_concurrent: 1 },
    cancel: { targeted: true },
    methods: [],
    events: [],
  },
};
