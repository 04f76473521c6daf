import { createParser, type EventSourceMessage } from "eventsource-parser";
import type { LlamaEndpoint, LlamaLease } from "../runtime/endpoint.ts";
import type { ToolCall } from "../store/chat-messages.ts";
import { ToolCallAssembler } from "./tool-calls.ts";

const BURST_SLICE = 64;

/** What went wrong talking to llama-server, named so the loop can react (retry, restart). */
export class LlmError extends Error {
  constructor(
    readonly kind: "context_overflow" | "server_error" | "connection_lost" | "bad_response",
    message: string,
    readonly data: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "LlmError";
  }
}

export interface CompletionRequest {
  messages: unknown[];
  tools?: unknown[];
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
}

export interface CompletionResult {
  content: string;
  toolCalls: ToolCall[];
  finishReason: string | null;
  usage: Record<string, unknown> | undefined;
  timings: Record<string, unknown> | undefined;
}

interface ChunkChoice {
  delta?: {
    content?: string | null;
    tool_calls?: {
      index: number;
      id?: string;
      type?: string;
      function?: { name?: string; arguments?: string };
    }[];
  };
  finish_reason?: string | null;
}

/**
 * One streamed step: POST /v1/chat/completions with stream:true, each content delta handed to
 * `onDelta` as it arrives, tool-call fragments assembled by index. `signal` aborts the fetch,
 * which closes the connection so llama-server stops generating (transcript 40).
 */
export async function streamCompletion(
  endpoint: LlamaEndpoint,
  request: CompletionRequest,
  signal: AbortSignal,
  onDelta: (delta: string) => void,
  /** Called whenever bytes arrive, so a watchdog can tell a slow server from a wedged one. */
  onProgress: () => void = () => {},
  /**
   * Called once the request is on its way (Bun sends it from its own thread), before the
   * answer is awaited: work that need not delay the request runs while llama-server reads
   * the prompt. What it throws ends the request and is thrown as it is.
   */
  onSent: () => void = () => {},
): Promise<CompletionResult> {
  const res = await openStream(endpoint, request, signal, onSent);

  const assembler = new ToolCallAssembler();
  const result: CompletionResult = {
    content: "",
    toolCalls: [],
    finishReason: null,
    usage: undefined,
    timings: undefined,
  };
  let done = false;
  let streamError: LlmError | undefined;
  /** Deltas parsed from the current network read, handed on after the read is parsed. */
  let arrived: string[] = [];
  const parser = createParser({
    onEvent(ev: EventSourceMessage) {
      if (done || streamError) return;
      const outcome = applyEvent(ev.data, result, assembler, arrived);
      if (outcome === "done") done = true;
      else if (outcome) streamError = outcome;
    },
  });

  const body = res.body;
  if (!body) throw new LlmError("bad_response", "llama-server answered without a body");
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    while (!done && !streamError) {
      const { value, done: eof } = await reader.read();
      if (eof) break;
      onProgress();
      parser.feed(decoder.decode(value, { stream: true }));
      const batch = arrived;
      arrived = [];
      for (let i = 0; i < batch.length; i++) {
        onDelta(batch[i] as string);
        // A read that carried a burst (the server got ahead of us) is handed on in slices with a
        // macrotask between them, so the writer drains and a normally-reading host loses nothing.
        if ((i + 1) % BURST_SLICE === 0 && i + 1 < batch.length) await new Promise((r) => setTimeout(r, 0));
      }
    }
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new LlmError(
      "connection_lost",
      `llama-server closed the stream mid-reply: ${(err as Error).message}`,
    );
  } finally {
    reader.cancel().catch(() => {});
  }
  if (streamError) throw streamError;
  if (signal.aborted) throw signal.reason;
  if (!done && result.finishReason === null) {
    throw new LlmError("connection_lost", "llama-server closed the stream before the reply finished");
  }
  result.toolCalls = assembler.calls();
  return result;
}

/** POSTs the streaming request; a refused connection or an error status becomes an LlmError. */
async function openStream(
  endpoint: LlamaEndpoint,
  request: CompletionRequest,
  signal: AbortSignal,
  onSent: () => void,
): Promise<Response> {
  const pending = fetch(`${endpoint.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${endpoint.apiKey}` },
    body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  try {
    onSent();
  } catch (err) {
    // Closing the stream is what tells llama-server to stop the task.
    void pending.then(
      (r) => r.body?.cancel(),
      () => {},
    );
    throw err;
  }
  let res: Response;
  try {
    res = await pending;
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new LlmError("connection_lost", `could not reach llama-server: ${(err as Error).message}`);
  }
  if (!res.ok) throw await httpError(res);
  return res;
}

/**
 * One SSE event's data applied to the reply (content deltas also queued on `arrived`):
 * "done" at `[DONE]`, an LlmError for garbage or an error event, else undefined.
 */
function applyEvent(
  data: string,
  result: CompletionResult,
  assembler: ToolCallAssembler,
  arrived: string[],
): "done" | LlmError | undefined {
  if (data === "[DONE]") return "done";
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return new LlmError("bad_response", `llama-server sent an event that is not JSON: ${excerpt(data)}`);
  }
  const shapeProblem = chunkProblem(parsed);
  if (shapeProblem) {
    return new LlmError(
      "bad_response",
      `llama-server sent an event of an unexpected shape (${shapeProblem}): ${excerpt(data)}`,
    );
  }
  const chunk = parsed as {
    choices?: ChunkChoice[];
    usage?: Record<string, unknown>;
    timings?: Record<string, unknown>;
    error?: { message?: string };
  };
  if (chunk.error)
    return new LlmError("server_error", `llama-server: ${chunk.error.message ?? "error in stream"}`);
  if (chunk.usage) result.usage = chunk.usage;
  if (chunk.timings) result.timings = chunk.timings;
  const choice = chunk.choices?.[0];
  if (!choice) return undefined;
  const content = choice.delta?.content;
  if (typeof content === "string" && content.length > 0) {
    result.content += content;
    arrived.push(content);
  }
  for (const tc of choice.delta?.tool_calls ?? []) assembler.push(tc);
  if (choice.finish_reason) result.finishReason = choice.finish_reason;
  return undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * What makes a parsed SSE event unusable, or undefined when it is fine. Only what the client
 * reads is checked; a server (or a model) sending something else is a named bad_response,
 * never a TypeError mistaken for a lost connection.
 */
function chunkProblem(v: unknown): string | undefined {
  if (!isObject(v)) return "not an object";
  if (v.choices === undefined) return undefined;
  if (!Array.isArray(v.choices)) return "choices is not an array";
  for (const choice of v.choices) {
    if (!isObject(choice)) return "a choice is not an object";
    const delta = choice.delta;
    if (delta === undefined || delta === null) continue;
    if (!isObject(delta)) return "delta is not an object";
    if (delta.content !== undefined && delta.content !== null && typeof delta.content !== "string")
      return "delta.content is not a string";
    if (delta.tool_calls === undefined || delta.tool_calls === null) continue;
    if (!Array.isArray(delta.tool_calls)) return "delta.tool_calls is not an array";
    for (const tc of delta.tool_calls) {
      if (!isObject(tc)) return "a tool call is not an object";
      const fn = tc.function;
      if (fn === undefined) continue;
      if (!isObject(fn)) return "a tool call's function is not an object";
      for (const key of ["name", "arguments"] as const) {
        if (fn[key] !== undefined && fn[key] !== null && typeof fn[key] !== "string")
          return `a tool call's function.${key} is not a string`;
      }
    }
  }
  return undefined;
}

function excerpt(data: string): string {
  return JSON.stringify(data.length > 80 ? `${data.slice(0, 80)}…` : data);
}

async function httpError(res: Response): Promise<LlmError> {
  const text = await res.text().catch(() => "");
  let err: { message?: string; type?: string; n_prompt_tokens?: number; n_ctx?: number } = {};
  try {
    err = (JSON.parse(text) as { error?: typeof err }).error ?? {};
  } catch {
    // Not JSON: keep the raw text (bounded) as the message.
  }
  const message = err.message ?? (text.slice(0, 300) || res.statusText);
  if (err.type === "exceed_context_size_error") {
    return new LlmError("context_overflow", `the conversation does not fit the model's context: ${message}`, {
      n_prompt_tokens: err.n_prompt_tokens,
      n_ctx: err.n_ctx,
    });
  }
  return new LlmError(
    res.status >= 500 ? "server_error" : "bad_response",
    `llama-server answered HTTP ${res.status}: ${message}`,
    {
      status: res.status,
    },
  );
}

/** Context sizes by server: a launch's `died` signal names it, and its n_ctx never changes. */
const contextSizes = new WeakMap<AbortSignal, number>();

/**
 * The context size per slot of the lease's server: GET /props once per launch (a round trip
 * off every later chat's time to first token), undefined while it cannot be read.
 */
export async function contextSizeOf(lease: LlamaLease, signal: AbortSignal): Promise<number | undefined> {
  const known = contextSizes.get(lease.died);
  if (known !== undefined) return known;
  const n = await fetchContextSize(lease, signal);
  if (n !== undefined) contextSizes.set(lease.died, n);
  return n;
}

/** The context size per slot, from GET /props (undefined when it cannot be read). */
async function fetchContextSize(endpoint: LlamaEndpoint, signal: AbortSignal): Promise<number | undefined> {
  try {
    const res = await fetch(`${endpoint.baseUrl}/props`, {
      headers: { Authorization: `Bearer ${endpoint.apiKey}` },
      signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]),
    });
    if (!res.ok) return undefined;
    const props = (await res.json()) as { default_generation_settings?: { n_ctx?: number } };
    const n = props.default_generation_settings?.n_ctx;
    return typeof n === "number" && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}
