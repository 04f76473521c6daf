import { serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  JSONRPCErrorResponseSchema,
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  JSONRPCResultResponseSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { jsonShape, MAX_SHALLOW_VALUES, MAX_VALUES, MCP_LOOK_FROM_CHARS } from "../../util/json-shape.ts";
import { keepLatest } from "../../util/keep-latest.ts";
import { logger } from "../../util/logger.ts";
import { cutText } from "../../util/text-cut.ts";
import { within } from "../../util/within.ts";
import { REFUSED_ANSWER } from "./call-result.ts";
import { exitText, type McpChild } from "./child.ts";
import { initializeEssentials } from "./initialize-answer.ts";
import { LineReader } from "./line-reader.ts";
import { overspentWhy, UNASKED_LIMITS, UnaskedBudget, type UnaskedLimits } from "./unasked-budget.ts";

/** Cancelled calls whose late answer still counts as asked for (the most recent). */
const CANCELLED_KEPT = 64;

/** How long output already in the pipe may still be read once the server exited. */
const DRAIN_AFTER_EXIT_MS = 200;

/**
 * How long a failed write waits for the server's exit to be seen: one that exits as the core
 * writes fails the write (EPIPE) a moment before its exit is reported.
 */
const EXIT_SEEN_MS = 1000;

/**
 * How much the core may hold for a server that does not read its stdin (docs/agent.md, MCP
 * servers): bytes written but not yet taken by the pipe, and how long one write may wait.
 */
export interface SendLimits {
  maxPendingBytes: number;
  stallMs: number;
  /** What it may send that no call asked for (unasked-budget.ts); UNASKED_LIMITS without. */
  unasked?: UnaskedLimits;
}

export const MAX_PENDING_BYTES = 1024 * 1024;

/**
 * The SDK's Transport over a server the pool spawned itself (child.ts), framed as the SDK's
 * StdioClientTransport frames it (one JSON-RPC message a line: line-reader.ts). That transport
 * spawns on its own and could not hand the guard (guard.ts) its socket. The connection ends
 * when the server exits, not when stdout ends: a child of its own may hold stdout open. What
 * the server sends beyond answers to the core's requests is held to a budget (unasked-budget.ts).
 */
export class ChildTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly lines = new LineReader();
  /** Shared with the reading of its stderr (connect.ts): one rate for all it sends unasked. */
  readonly budget: UnaskedBudget;
  /** The core's requests not yet answered and not cancelled: their answers were asked for. */
  /**
   * Kept as the SDK matches an answer to its request, by Number(id): an answer whose id came as
   * text (`"3"`) was charged as unasked, and a 6 MB result so got its server killed as a flood.
   */
  private readonly awaited = new Set<number>();
  /**
   * Cancelled calls' ids, the last CANCELLED_KEPT, each with when it was cancelled: an answer may
   * cross the cancel and is still asked for, but a server need not send one (MCP: it should not),
   * so each cancelled call kept its id for the server's life, and with it a wait for an answer
   * that never comes, and no early refusal of an unasked line (`read`). One is asked for no longer
   * than a call's own timeout (`stallMs`, the server's timeout_s) after its cancel.
   */
  private readonly cancelled = new Map<number, number>();
  private ended = false;
  /** Why the core killed it, if it did: what a call it ends is told (pool.ts). */
  stoppedFor: string | undefined;
  /** How the server ended (`exited with code 3`) once it has: what a call it ends is told (pool.ts). */
  exitedAs: string | undefined;
  /** The core stopped it (close): its exit is the one asked for, not logged. */
  private closing = false;
  /** Bytes handed to the server's stdin whose flush has not settled. */
  private pending = 0;
  /** The id of the core's `initialize`: its answer is cut first (initialize-answer.ts). */
  private initializeId: string | number | undefined;
  /**
   * Lines it wrote that were no JSON-RPC message, and the first one's head: a start that times out
   * says so (connect.ts), since a server printing its answers over several lines was told only as
   * a timeout.
   */
  readonly stray = { lines: 0, first: "", cut: false };

  constructor(
    private readonly child: McpChild,
    private readonly name: string,
    private readonly limits: SendLimits,
  ) {
    this.budget = new UnaskedBudget(limits.unasked ?? UNASKED_LIMITS);
  }

  /** Ids whose answer would count as asked for (tests check that cancelled calls' do not pile up). */
  get awaiting(): number {
    this.forgetLate();
    return this.awaited.size + this.cancelled.size;
  }

  private cancel(id: number): void {
    if (this.awaited.delete(id)) keepLatest(this.cancelled, id, performance.now(), CANCELLED_KEPT);
  }

  /** Cancelled calls whose answer is later than their own timeout: it is asked for no more. */
  private forgetLate(): void {
    if (this.cancelled.size === 0) return;
    const since = performance.now() - this.limits.stallMs;
    // In the order they were cancelled: the first younger one ends the look.
    for (const [id, at] of this.cancelled) {
      if (at > since) break;
      this.cancelled.delete(id);
    }
  }

  async start(): Promise<void> {
    const reading = this.read();
    void this.child.exited.then(async (exit) => {
      this.exitedAs = exitText(exit);
      if (!this.closing && !this.stoppedFor)
        logger.warn(`MCP server '${this.name}' (pid ${this.child.pid}) ${this.exitedAs}`);
      await within(reading, DRAIN_AFTER_EXIT_MS, undefined);
      this.end();
    });
  }

  /**
   * A server that floods requests and stops reading its stdin would have the SDK's answers
   * (and its state for each request) queue in memory for as long as the core runs: past
   * maxPendingBytes, or a write stuck for stallMs, it is killed like a crashed server.
   */
  async send(message: JSONRPCMessage): Promise<void> {
    if (this.ended) throw new Error("Not connected");
    const data = serializeMessage(message);
    const bytes = Buffer.byteLength(data);
    if (this.pending + bytes > this.limits.maxPendingBytes) {
      const why = `it does not read its stdin (over ${this.limits.maxPendingBytes} bytes waiting)`;
      this.kill(why);
      throw new Error(`MCP server '${this.name}' was stopped: ${why}`);
    }
    if ("method" in message && "id" in message) {
      this.awaited.add(Number(message.id));
      if (message.method === "initialize") this.initializeId = message.id;
    } else if ("method" in message && message.method === "notifications/cancelled") {
      this.cancel(Number((message.params as { requestId?: unknown } | undefined)?.requestId));
    }
    this.pending += bytes;
    const stall = setTimeout(
      () => this.kill(`a write to its stdin waited over ${this.limits.stallMs} ms`),
      this.limits.stallMs,
    );
    let failed: Error | undefined;
    try {
      await this.child.write(data);
    } catch (err) {
      failed = err as Error;
    } finally {
      clearTimeout(stall);
      this.pending -= bytes;
    }
    if (failed) throw await this.writeFailed(failed);
  }

  /**
   * What a call whose message could not be written is told. A server that exited as the core
   * wrote to it is told by its exit (its code or signal, which a host developer can act on; its
   * connection ends as any exit does), not as killed for a closed stdin: its exit is waited for
   * up to EXIT_SEEN_MS. One whose stdin closed while it lives on (EPIPE) is killed: nothing
   * reaches it again, and it would be kept, failing every call, for the core's life; killed, it
   * is started afresh on next use.
   */
  private async writeFailed(err: Error): Promise<Error> {
    if (!this.ended) await within(this.child.exited, EXIT_SEEN_MS, undefined);
    if (this.stoppedFor) return new Error(`MCP server '${this.name}' was stopped: ${this.stoppedFor}`);
    if (this.exitedAs) return new Error(`MCP server '${this.name}' ${this.exitedAs}`);
    if (this.ended) return err;
    const why = `its stdin is closed (${err.message})`;
    this.kill(why);
    return new Error(`MCP server '${this.name}' was stopped: ${why}`);
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.child.stop();
    this.end();
  }

  /** SIGKILL now and the connection ends at once (its pending requests fail); logged. */
  kill(why: string): void {
    if (this.ended) return;
    this.stoppedFor = why;
    logger.warn(`MCP server '${this.name}' (pid ${this.child.pid}) killed: ${why}`);
    this.child.kill();
    this.end();
  }

  private async read(): Promise<void> {
    try {
      for await (const chunk of this.child.stdout) {
        for (const line of this.lines.push(chunk)) {
          if (this.ended) return;
          if (line.length > MCP_LOOK_FROM_CHARS) await this.deliverLong(line);
          else this.deliver(line, line.toString());
        }
        if (this.ended) return;
        // With no answer awaited, a line still arriving can only be unasked: refused before it ends.
        // (A cancelled call's answer may still come, large.)
        if (this.awaiting === 0 && !this.budget.room(this.lines.pending)) this.overspent();
      }
    } catch (err) {
      // Over the line's limit, or a broken pipe: this connection is done, killed like any server
      // the core gives up on, so that the log and a call in flight say why (a plain close said
      // only "Connection closed", and waited for a busy server's stop).
      this.kill(`reading its stdout failed: ${(err as Error).message}`);
    }
  }

  /**
   * A line over MCP_LOOK_FROM_CHARS, its decode, its look (`tooManyValues`), its parse and its
   * handing on each in a turn of the loop's own: on a 16 MiB line each took 20-120 ms, and ping
   * and cancel waited for them together (its reader's work on it, a structured result
   * stringified, runs in the turn it is handed on).
   */
  private async deliverLong(line: Buffer): Promise<void> {
    await nextTurn();
    const text = line.toString();
    await nextTurn();
    let looked: (() => JSONRPCMessage) | undefined;
    try {
      const refused = tooManyValues(text);
      if (refused) looked = () => refused;
    } catch (err) {
      looked = () => {
        throw err;
      };
    }
    if (!looked) {
      await nextTurn();
      const json = outcomeOf((): unknown => JSON.parse(text));
      await nextTurn();
      looked = () => readMessage(json());
    }
    if (!this.ended) this.deliver(line, text, looked);
  }

  /** `line` read as `read` reads it (`tooManyValues`, then `parseMessage`), and handed on or charged. */
  private deliver(
    line: Buffer,
    text: string,
    read: () => JSONRPCMessage = () => tooManyValues(text) ?? parseMessage(text),
  ): void {
    let message: JSONRPCMessage | undefined;
    try {
      // An empty line (or a lone \r) is no message, but is charged like one.
      message = text.length <= 1 && text.trim() === "" ? undefined : read();
    } catch (err) {
      this.onerror?.(err as Error); // one bad line, skipped (and charged below)
      if (this.stray.lines++ === 0)
        Object.assign(this.stray, { first: text.slice(0, STRAY_KEPT), cut: text.length > STRAY_KEPT });
    }
    const id = message !== undefined && isAnswer(message) ? Number(message.id) : undefined;
    // A cancelled call past its timeout is forgotten before its answer is looked up, not only
    // after the chunk's lines: else a late answer arriving whole in one chunk went uncharged.
    if (id !== undefined && !this.awaited.has(id)) this.forgetLate();
    const asked = id !== undefined && (this.awaited.delete(id) || this.cancelled.delete(id));
    if (!asked && !this.budget.take(line.length)) this.overspent();
    else if (message) this.onmessage?.(essentials(message, this.initializeId));
  }

  private overspent(): void {
    this.kill(overspentWhy(this.budget.limits));
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.lines.clear();
    this.onclose?.();
  }
}

/**
 * The answer to `initialize` cut to what is read of it; any other message as it is. Its id is
 * compared as the SDK matches answers to requests, by Number(): `"0"`, `" 0"` and `""` answer
 * request 0 too.
 */
function essentials(m: JSONRPCMessage, initializeId: string | number | undefined): JSONRPCMessage {
  if (initializeId === undefined || !("result" in m) || Number(m.id) !== Number(initializeId)) return m;
  return { ...m, result: initializeEssentials(m.result) } as JSONRPCMessage;
}

/** An answer to a request (a result or an error), as opposed to a request or a notification. */
function isAnswer(m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number } {
  return !("method" in m) && "id" in m && (typeof m.id === "string" || typeof m.id === "number");
}

/**
 * A line as a JSON-RPC message, as the SDK's own reader parses it, but for an answer its schema
 * refuses (`"error": null` beside a result, as sloppy JSON-RPC libraries write, or a result that
 * is no object): skipped as a bad line, its call waited out timeout_s and its server was killed,
 * and such an answer to `initialize` failed every start as a timeout. It is the error answer to
 * its id, naming the refusal, which its call (or start) then fails with at once. Throws as the
 * SDK's reader does for anything else it refuses.
 */
function parseMessage(text: string): JSONRPCMessage {
  return readMessage(JSON.parse(text));
}

/** `parseMessage` of a line already parsed. */
function readMessage(json: unknown): JSONRPCMessage {
  const parsed = JSONRPCMessageSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const m = json as { id?: unknown; method?: unknown } | null;
  const answer = typeof m === "object" && m !== null && !("method" in m);
  if (!answer || (typeof m.id !== "string" && typeof m.id !== "number")) throw parsed.error;
  // The union's own issue says only "Invalid input": the kind of answer it looks like says more.
  const kind = "result" in m || !("error" in m) ? JSONRPCResultResponseSchema : JSONRPCErrorResponseSchema;
  const why = (kind.safeParse(json).error ?? parsed.error).issues
    .slice(0, ISSUES_SHOWN)
    .map((i) => cutText(`${i.path.length > 0 ? `${i.path.join(".")}: ` : ""}${i.message}`, ISSUE_CHARS))
    .join("; ");
  const message = `the server's message is not a valid JSON-RPC answer (${why})`;
  return {
    jsonrpc: "2.0",
    id: m.id,
    error: { code: ErrorCode.InternalError, message, data: REFUSED_ANSWER },
  };
}

/** What `work` gave, or threw, to be told again when asked. */
function outcomeOf<T>(work: () => T): () => T {
  try {
    const value = work();
    return () => value;
  } catch (err) {
    return () => {
      throw err;
    };
  }
}

/** The loop's next turn: a ping or cancel waiting is read first. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** How much of the first stray line is kept: room for a secret to be redacted before its cut (connect.ts). */
const STRAY_KEPT = 4096;

/** How much of a refused answer's issues its error names: a few, each cut (one may quote a key). */
const ISSUES_SHOWN = 3;
const ISSUE_CHARS = 120;

/**
 * A long line holding more values than MAX_VALUES, or more than MAX_SHALLOW_VALUES in its top two
 * levels, answered for it without its parse (util/json-shape.ts): an error answer to its id, which
 * its call then fails with; one with no id, or a request or notification of the server's own, is
 * thrown (skipped as a bad line). Undefined: the line is parsed as it is.
 */
function tooManyValues(text: string): JSONRPCMessage | undefined {
  if (text.length <= MCP_LOOK_FROM_CHARS) return undefined;
  const shape = jsonShape(text);
  let message: string;
  if (shape.values > MAX_VALUES)
    message = `the server's message holds about ${shape.values} JSON values; at most ${MAX_VALUES} are read in a message over ${MCP_LOOK_FROM_CHARS} characters`;
  else if (shape.shallow > MAX_SHALLOW_VALUES)
    message = `the server's message holds about ${shape.shallow} JSON values in its top two levels; at most ${MAX_SHALLOW_VALUES} are read there in a message over ${MCP_LOOK_FROM_CHARS} characters`;
  else return undefined;
  // A request of the server's own (ids of both sides start at 0) is no answer to a call of ours.
  if (shape.id === undefined || shape.method) throw new Error(message);
  return {
    jsonrpc: "2.0",
    id: shape.id,
    error: { code: ErrorCode.InternalError, message, data: REFUSED_ANSWER },
  };
}
