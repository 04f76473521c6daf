import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import { jsonBody } from "./data-url.ts";
import { excerpt, LlmError } from "./errors.ts";
import type { LlamaEndpoint } from "./http.ts";
import type { SpareConnection } from "./spare-connection.ts";
import { type Arrivals, applyEvent, type CompletionResult, emptyReply, errorField } from "./stream-reply.ts";
import { type BodyReader, postStream } from "./stream-socket.ts";
import { ToolCallAssembler } from "./tool-call-deltas.ts";

/**
 * The streaming chat completion (test/fixtures/llama-server/transcripts/11–17): `data: <json>\n\n`
 * events, a first delta with the role, one per token, a chunk with `finish_reason` and `timings`,
 * then (asked for with `include_usage`) one with `usage` and no choices, and `data: [DONE]`. An
 * overflow is answered before any event (22b); an error may also come as an event mid-stream.
 * Asked for with `return_progress`, the prompt's read comes first as role deltas with
 * `prompt_progress`, one as the slot starts and one a batch (98, 98b): no content, no usage, no
 * timings (unless `timings_per_token`, 98c, not asked), so the event's usual checks pass them as
 * no token, with no test of their own; they show the read moving (StreamOptions.onProgress).
 */

const BURST_SLICE = 64;

/**
 * Most characters one event may hold while it is still arriving (its line, or its `data:` lines
 * before the blank line that ends it). llama-server's events are a token's delta or the
 * finish's timings, a few hundred bytes; one past this is a broken server, ended as bad_response
 * when it gets there rather than held in memory until the connection closes (docs/agent.md,
 * "How a turn ends").
 */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024;

/**
 * The most characters one token's text can stream as: llama-server generates at most its slot's
 * context in tokens, so a step's reply (content, reasoning and tool-call arguments) is bounded by
 * the context times this. The longest tokens of the vocabularies llama.cpp tests with
 * (models/ggml-vocab-*.gguf: gpt-neox and mpt 512 spaces, starcoder and refact 256, gpt-2 and
 * deepseek-llm 128, Llama's SentencePiece 16) are 512 characters; doubled for the escaping a
 * token's text gets in a tool call's JSON arguments (a newline written `\n`).
 */
export const CHARS_PER_TOKEN = 1024;

/**
 * Most characters of content, reasoning and tool-call arguments one reply may stream, whatever
 * the context: the result line carries the answer, its reasoning and (response_format) its json
 * again, at most 6 bytes a character as JSON, and it, the stored message and a sessions.get page
 * holding it must stay under the 32 MiB a typed client reads (docs/protocol.md "Answer sizes").
 * A real reply is far shorter: 2 Mi characters is some 500,000 tokens of one step.
 */
export const MAX_REPLY_CHARS = 2 * 1024 * 1024;

export interface CompletionRequest {
  messages: unknown[];
  tools?: unknown[];
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  /**
   * Thinking (test/fixtures/llama-server/transcripts/91c, 91d): `enable_thinking` for the template,
   * an effort, a budget.
   */
  chat_template_kwargs?: Record<string, unknown>;
  reasoning_effort?: string;
  reasoning_budget_tokens?: number;
  /**
   * The answer constrained by a grammar (test/fixtures/llama-server/transcripts/95–95d): `{type:
   * "json_schema", json_schema: {schema}}` or `{type: "json_object"}`.
   */
  response_format?: Record<string, unknown>;
  /** The slot to run in (one restored from a file: llama/slots.ts); else llama-server picks one (92). */
  id_slot?: number;
}

export type { CompletionResult, Timings, Usage } from "./stream-reply.ts";

/** The signal and the callbacks of one streamed step, by name (as the MCP SDK's `RequestOptions`). */
export interface StreamOptions {
  /** Aborts the fetch, which closes the connection so llama-server stops generating (transcript 40). */
  signal: AbortSignal;
  /** Each content delta as it arrives. */
  onDelta: (delta: string) => void;
  /**
   * Called once for a network read that dispatched an SSE event, so a watchdog can tell a slow
   * server from a wedged one: a token, or while the prompt is read a progress event (one a
   * batch, transcripts/98b). One event arriving over many reads (a large delta) counts when it
   * ends.
   */
  onProgress?: () => void;
  /**
   * Called once for a read before the first token that dispatched no event: llama-server sends
   * an SSE ping (`:\n\n`) every 30 s of silence from its HTTP thread, wedged task loop or not
   * (test/fixtures/llama-server/transcripts/67). While the prompt is read a batch (or an image)
   * can take minutes on a slow machine with only pings to show: alive, not progress. After the
   * first token a ping is nothing.
   */
  onAlive?: () => void;
  /**
   * Called once the whole request has been handed to the kernel, before the answer arrives:
   * work that need not delay the request runs while llama-server reads the prompt. What it
   * throws ends the request and is thrown as it is. A connection that fails first never calls it.
   */
  onSent?: () => void;
  /**
   * Called once llama-server answered 2xx: it launched the task in a slot (the headers go with
   * its first event, transcripts 98b), cutting the slot's old tokens past the common prefix. An
   * error status (an overflow's 400, a 500) comes before any: the slot's tokens are not cut,
   * though picking the slot may have copied them into the RAM cache (b10587 get_available_slot).
   */
  onStarted?: () => void;
  /** A connection opened ahead to the same server, used for this request when it can be (spare-connection.ts). */
  spare?: SpareConnection;
  /**
   * Each reasoning delta as it arrives (thinking models,
   * test/fixtures/llama-server/transcripts/91), before the content of the same read; absent,
   * reasoning is only gathered into the result's `reasoning`.
   */
  onReasoning?: (delta: string) => void;
  /**
   * Once deltas are handed on, the answer is left unread for this many ms, and what came
   * meanwhile goes on joined: one `onDelta` (one `onReasoning`) a read. A delta after a quiet
   * spell goes at once; one behind it waits at most this long. 0 or absent: each delta on its
   * own, as it arrives (docs/performance.md, "Joined pieces").
   */
  gatherMs?: number;
  /**
   * Most characters of content, reasoning and tool-call arguments together the reply may stream
   * (the context times CHARS_PER_TOKEN, and never past MAX_REPLY_CHARS): past it the server is
   * broken or hostile, and the request ends as bad_response (what had arrived is the caller's, as
   * for any failure).
   */
  maxChars?: number;
}

/**
 * One streamed step: POST /v1/chat/completions with stream:true, each content delta handed to
 * `onDelta` as it arrives, tool-call fragments assembled by index.
 */
export async function streamCompletion(
  endpoint: LlamaEndpoint,
  request: CompletionRequest,
  options: StreamOptions,
): Promise<CompletionResult> {
  const { signal, onDelta, onProgress, onAlive, onReasoning, maxChars } = options;
  const gatherMs = options.gatherMs ?? 0;
  const sentAt = performance.now();
  const result = emptyReply();
  const reader = await openStream(endpoint, request, options, () => {
    result.writtenAt = performance.now();
    options.onSent?.();
  });
  options.onStarted?.();

  const assembler = new ToolCallAssembler();
  let done = false;
  let streamError: LlmError | undefined;
  /** Deltas parsed from the current network read, handed on after the read is parsed. */
  const arrived: Arrivals = { content: [], reasoning: onReasoning ? [] : undefined };
  let events = 0; // dispatched so far: one read that added some dispatched one, no call per event
  const parser = createParser({
    onEvent(ev: EventSourceMessage) {
      if (ev.data === "") return; // `data:` alone (SSE: an event of no data) carries what a ping does
      events++;
      if (done || streamError) return;
      const outcome = applyEvent(ev.data, result, assembler, arrived);
      if (outcome === "done") done = true;
      else if (outcome) streamError = outcome;
    },
    maxBufferSize: MAX_EVENT_CHARS,
    onError(err) {
      // After `[DONE]` the reply is whole: what follows is no part of it, as events are not.
      if (done) return;
      streamError ??= parseError(err, events);
    },
  });

  try {
    while (!done && !streamError) {
      const text = await reader.read();
      const before = events;
      // A JSON body ends with no line break: its one line is read as the stream ends.
      if (text === undefined && events === 0) parser.reset({ consume: true });
      if (text === undefined) break;
      parser.feed(text);
      // An event is progress; before the first token a ping says the server is alive (a batch
      // of the prompt may outlast the limit: docs/agent.md "Progress"). One test a read.
      if (events > before) onProgress?.();
      else if (result.firstTokenAt === undefined) onAlive?.();
      streamError ??=
        overBound(result, assembler, maxChars) ?? tooManyEvents(events, result, assembler, maxChars);
      if (gatherMs > 0) {
        if (!arrivalsEmpty(arrived)) reader.rest(gatherMs);
        joinArrivals(arrived);
      }
      // The queues are emptied once handed on, not replaced: no allocation per read.
      if (onReasoning && arrived.reasoning?.length) {
        const slicing = handOn(arrived.reasoning, onReasoning);
        if (slicing) await slicing;
        arrived.reasoning.length = 0;
      }
      const slicing = handOn(arrived.content, onDelta);
      if (slicing) await slicing;
      arrived.content.length = 0;
    }
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new LlmError(
      "connection_lost",
      `llama-server closed the stream mid-reply: ${(err as Error).message}`,
    );
  } finally {
    reader.close();
  }
  if (streamError) throw streamError;
  if (signal.aborted) throw signal.reason;
  return finished(result, assembler, done, sentAt);
}

/**
 * The parser's complaint as the stream's error: an event too long; an `error:` field, an older
 * build's error result (stream-reply.ts `errorField`); or a line of no SSE field before any
 * event, a body that is no event stream (a JSON error, a proxy's page), which would else end as a
 * lost connection and blame the server. Later such lines are skipped, as SSE says.
 */
function parseError(err: ParseError, events: number): LlmError | undefined {
  if (err.type === "max-buffer-size-exceeded") return eventTooLong();
  const error =
    err.type === "unknown-field" && err.field === "error" ? errorField(err.value ?? "") : undefined;
  if (error) return error;
  if (err.type === "unknown-field" && events === 0) return notStream(err.line ?? "");
  return undefined;
}

function notStream(line: string): LlmError {
  return new LlmError(
    "bad_response",
    `llama-server answered with a body that is not an event stream: ${excerpt(line)}`,
  );
}

/** The reply once its stream ended: one that ended before its finish is a lost connection. */
function finished(
  result: CompletionResult,
  assembler: ToolCallAssembler,
  done: boolean,
  sentAt: number,
): CompletionResult {
  if (!done && result.finishReason === null) {
    throw new LlmError("connection_lost", "llama-server closed the stream before the reply finished");
  }
  result.toolCalls = assembler.calls();
  // Time to first token as the host sees it: from sending the request, HTTP included.
  if (result.firstTokenAt !== undefined) result.ttftMs = result.firstTokenAt - sentAt;
  return result;
}

const eventTooLong = () =>
  new LlmError(
    "bad_response",
    `llama-server sent an event over ${MAX_EVENT_CHARS} characters without its end`,
  );

/** A reply past what the step can hold (StreamOptions.maxChars): a running total, looked at once a read, never per token. */
function overBound(
  result: CompletionResult,
  assembler: ToolCallAssembler,
  maxChars: number | undefined,
): LlmError | undefined {
  if (maxChars === undefined) return undefined;
  const most = Math.min(maxChars, MAX_REPLY_CHARS);
  if (replyChars(result, assembler) <= most) return undefined;
  const why =
    most === maxChars
      ? `${CHARS_PER_TOKEN} a token of its context: more than it can generate`
      : "more than a result line carries to the host";
  return new LlmError(
    "bad_response",
    `llama-server streamed more than ${most} characters in one reply (${why})`,
  );
}

/** Characters of content, reasoning and tool-call arguments the reply holds so far. */
const replyChars = (result: CompletionResult, assembler: ToolCallAssembler) =>
  result.content.length + result.reasoning.length + assembler.chars;

/**
 * More events without text than the step's reply can hold: llama-server sends one for a token
 * that shows none (at most its context of tokens), one a batch of the prompt read, and a few at
 * the end; events with text are bounded by `overBound`. A server that streams empty deltas
 * forever is broken: the watchdog takes each event for progress, so this bound ends it. Each
 * event with text added a character at least, so the events past the reply's characters are
 * empty ones: counted once a read, nothing a token.
 */
function tooManyEvents(
  events: number,
  result: CompletionResult,
  assembler: ToolCallAssembler,
  maxChars: number | undefined,
): LlmError | undefined {
  if (maxChars === undefined) return undefined;
  const most = 2 * (maxChars / CHARS_PER_TOKEN) + 64;
  if (events - replyChars(result, assembler) <= most) return undefined;
  return new LlmError(
    "bad_response",
    `llama-server sent more than ${most} events without text in one reply (twice its context: more than it can generate)`,
  );
}

const arrivalsEmpty = (a: Arrivals) => a.content.length === 0 && !a.reasoning?.length;

/** Each queue's deltas as one. */
function joinArrivals(arrived: Arrivals): void {
  if (arrived.content.length > 1) arrived.content.splice(0, arrived.content.length, arrived.content.join(""));
  const r = arrived.reasoning;
  if (r && r.length > 1) r.splice(0, r.length, r.join(""));
}

/**
 * The deltas of one read, in order, at once (no promise for the usual read of a token or
 * two). A read that carried a burst (the server got ahead of us) is handed on in slices with a
 * macrotask between them, so the writer drains and a normally reading host loses nothing:
 * then the returned promise settles once all are handed on.
 */
function handOn(batch: string[], to: (delta: string) => void, from = 0): Promise<void> | undefined {
  for (let i = from; i < batch.length; i++) {
    to(batch[i] as string);
    if ((i + 1) % BURST_SLICE === 0 && i + 1 < batch.length)
      return new Promise<void>((r) => setTimeout(r, 0)).then(() => handOn(batch, to, i + 1));
  }
  return undefined;
}

/**
 * What every streamed request asks for besides its own: the usage chunk at the end (12), and the
 * prompt's progress as events while it is read (`return_progress`, 98b), so a task loop wedged
 * mid-prompt is told from a slow one (docs/agent.md "Progress").
 */
export const STREAM_FIELDS = {
  stream: true,
  stream_options: { include_usage: true },
  return_progress: true,
} as const;

/**
 * POSTs the streaming request over its own socket (stream-socket.ts); a refused connection or
 * an error status becomes an LlmError.
 */
function openStream(
  endpoint: LlamaEndpoint,
  request: CompletionRequest,
  options: StreamOptions,
  onSent: () => void,
): Promise<BodyReader> {
  // Images stay bytes until written (data-url.ts).
  const body = jsonBody({ ...request, ...STREAM_FIELDS });
  return postStream(endpoint, "/v1/chat/completions", body, options.signal, onSent, options.spare);
}
