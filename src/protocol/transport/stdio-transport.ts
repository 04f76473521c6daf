import { logger, logUnexpected } from "../../util/logger.ts";
import type { ErrorMessage, EventMessage, RequestId, ResultMessage } from "../messages.ts";
import type { OutputPort } from "../method-table.ts";
import { type Frame, LineSplitter } from "./framing.ts";
import { type Sink, Writer } from "./writer.ts";

/** The `stdio` section of the config, in the transport's terms. */
export interface TransportLimits {
  /** Longest request line, in bytes as received (`stdio.max_line_bytes`). */
  maxLineBytes: number;
  /** Messages held before events are dropped (`stdio.queue_size`). */
  queueSize: number;
  /** How long a stop waits for queued output to reach stdout (`stdio.drain_timeout_ms`). */
  drainTimeoutMs: number;
}

/** What the transport needs of the input stream's reader. */
type ByteReader = {
  read(): Promise<{ done: true; value?: Uint8Array } | { done: false; value: Uint8Array }>;
  cancel(): Promise<void>;
};

/**
 * The protocol's stdio transport, as one unit (the shape of the MCP SDK's
 * StdioServerTransport): it reads bytes, frames them into lines within the line limit, and
 * writes messages through the bounded writer. What is above it talks in whole lines and whole
 * messages: a line too long to read is answered here (`invalid_request`, `"id": null`: its id
 * was never read), and neither framing nor limits reach the dispatcher.
 */
export class StdioTransport implements OutputPort {
  private readonly reader: ByteReader;
  private readonly splitter: LineSplitter;
  private readonly writer: Writer;
  private readonly limits: TransportLimits;
  /** Reading was stopped from this side: what is left of a line is not a line. */
  private stopped = false;
  /** Ends a wait for the output's backlog (`listen`), when reading stops. */
  private unpause: (() => void) | undefined;

  constructor(input: ReadableStream<Uint8Array>, sink: Sink, limits: TransportLimits) {
    this.limits = { ...limits };
    this.reader = input.getReader();
    this.splitter = new LineSplitter(limits.maxLineBytes);
    this.writer = new Writer(sink, { queueSize: limits.queueSize });
  }

  /** Applies the config's limits (it loads after the loop has started). */
  setLimits(limits: TransportLimits): void {
    Object.assign(this.limits, limits);
    this.splitter.maxLineBytes = limits.maxLineBytes;
    this.writer.setQueueSize(limits.queueSize);
  }

  /**
   * Hands each line to `onLine` as it arrives, until end of input or stopReading(). A last
   * line without its newline still counts when the input ends, not when this side stopped.
   */
  async listen(onLine: (line: string) => void): Promise<void> {
    try {
      for (;;) {
        const full = this.writer.backlogFull();
        if (full) {
          // The host reads none of the answers: no more requests until it does (writer.ts).
          await new Promise<void>((resolve) => {
            this.unpause = resolve;
            void full.then(resolve);
          });
          this.unpause = undefined;
          if (this.stopped) break;
        }
        const { value, done } = await this.reader.read();
        if (done) break;
        this.deliver(this.splitter.push(value), onLine);
      }
      if (!this.stopped) this.deliver(this.splitter.end(), onLine);
    } catch (err) {
      if (!this.stopped) logUnexpected("reading stdin failed", err);
    }
  }

  /** Ends listen(): no more input is read. */
  stopReading(): void {
    this.stopped = true;
    this.unpause?.();
    this.reader.cancel().catch(() => {});
  }

  /**
   * Waits, at most `drainTimeoutMs`, until everything queued has reached the sink. Enough for
   * stdout: Bun's write() returns true only once the bytes are in the pipe, false (the writer
   * then waits for 'drain') while any stay in the process (docs/protocol.md "Drain on exit").
   */
  async drain(): Promise<void> {
    // Every answer is made; what is left is the host's reading (the e2e tests wait for this line).
    logger.debug("draining output before exit");
    const drained = await this.writer.drain(this.limits.drainTimeoutMs);
    if (!drained) logger.warn(`output not fully drained within ${this.limits.drainTimeoutMs} ms`);
  }

  event(msg: EventMessage): boolean {
    return this.writer.event(msg);
  }

  eventOf(id: RequestId, event: string, fields: object): boolean {
    return this.writer.eventOf(id, event, fields);
  }

  tryTerminal(msg: ResultMessage | ErrorMessage): boolean {
    return this.writer.tryTerminal(msg);
  }

  terminal(msg: ResultMessage | ErrorMessage): Promise<void> {
    return this.writer.terminal(msg);
  }

  /**
   * One line to the dispatcher. A throw out of it is a defect of ours, not the host's: the line
   * is answered `internal_error` and the next one read (it would otherwise end the read loop, and
   * the core with it, over one line).
   */
  private handled(text: string, onLine: (line: string) => void): void {
    try {
      onLine(text);
    } catch (err) {
      logUnexpected("a request line could not be handled", err);
      void this.writer.terminal({
        id: null,
        type: "error",
        code: "internal_error",
        message: "the core could not handle this request line; it goes on with the next",
      });
    }
  }

  private deliver(frames: Frame[], onLine: (line: string) => void): void {
    for (const frame of frames) {
      if (frame.kind === "line") this.handled(frame.text, onLine);
      else
        void this.writer.terminal({
          id: null,
          type: "error",
          code: "invalid_request",
          message: `request line of ${frame.bytes} bytes exceeds the limit of ${this.limits.maxLineBytes} bytes`,
          data: { reason: "line_too_long", line_bytes: frame.bytes, limit_bytes: this.limits.maxLineBytes },
        });
    }
  }
}
