import type { ToolCall } from "../protocol/chat-message.ts";
import { jsonShape, LOOK_FROM_CHARS } from "../util/json-shape.ts";
import { eventError, excerpt, LlmError, serverMessage } from "./errors.ts";
import type { ToolCallAssembler, ToolCallDelta } from "./tool-call-deltas.ts";

/**
 * One SSE event of a streamed completion applied to the reply. On the hot path (every
 * token): one JSON.parse and a hand-written check of what the client reads, no schema.
 */

/** llama-server's token counts (`usage`, OpenAI's names); its other numbers are kept as sent. */
export interface Usage {
  completion_tokens?: number;
  prompt_tokens?: number;
  total_tokens?: number;
  [field: string]: unknown;
}

/**
 * llama-server's own timings (`cache_n` is the prompt reused from the slot:
 * test/fixtures/llama-server/transcripts/92).
 */
export interface Timings {
  cache_n?: number;
  prompt_n?: number;
  prompt_ms?: number;
  predicted_n?: number;
  predicted_ms?: number;
  [field: string]: unknown;
}

export interface CompletionResult {
  content: string;
  /**
   * What a thinking model reasoned before its answer (`delta.reasoning_content`,
   * test/fixtures/llama-server/transcripts/91, 91d): with llama-server's default reasoning format
   * it never reaches `content`.
   */
  reasoning: string;
  /**
   * Reasoning deltas received: llama-server streams one per generated token, and counts them in
   * `usage.completion_tokens` with the content's (it reports no count of its own).
   */
  reasoningTokens: number;
  toolCalls: ToolCall[];
  finishReason: string | null;
  usage: Usage | undefined;
  timings: Timings | undefined;
  /** `performance.now()` when the whole request was in the kernel (the connection's write). */
  writtenAt?: number;
  /** `performance.now()` when the first token (content, reasoning or a tool call) arrived. */
  firstTokenAt?: number;
  /** From sending the request to the first token, ms (set once the stream ended). */
  ttftMs?: number;
}

/** A reply before its first event. */
export function emptyReply(): CompletionResult {
  return {
    content: "",
    reasoning: "",
    reasoningTokens: 0,
    toolCalls: [],
    finishReason: null,
    usage: undefined,
    timings: undefined,
  };
}

interface ChunkChoice {
  delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: ToolCallDelta[] };
  finish_reason?: string | null;
}

/** Where the deltas of the current network read wait to be handed on. */
export interface Arrivals {
  content: string[];
  /** Absent when no one listens to reasoning: then it is only added to the reply. */
  reasoning?: string[];
}

/**
 * One event's data applied to the reply (its deltas also queued on `arrived`): "done" at
 * `[DONE]`, an LlmError for garbage or an error event, else undefined.
 */
export function applyEvent(
  data: string,
  result: CompletionResult,
  assembler: ToolCallAssembler,
  arrived: Arrivals,
): "done" | LlmError | undefined {
  if (data === "[DONE]") return "done";
  // A token's delta is a few values however long: one of many values is no event of llama-server's.
  if (data.length > LOOK_FROM_CHARS && jsonShape(data).values > MAX_EVENT_VALUES)
    return new LlmError(
      "bad_response",
      `llama-server sent an event of over ${MAX_EVENT_VALUES} JSON values: ${excerpt(data)}`,
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(data, ESCAPED_SURROGATE.test(data) ? wellFormedString : undefined);
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
    usage?: Usage;
    timings?: Timings;
    error?: unknown;
  };
  if (chunk.error) return streamedError(chunk.error, data);
  if (chunk.usage) result.usage = numbers(chunk.usage);
  if (chunk.timings) result.timings = numbers(chunk.timings);
  const choice = chunk.choices?.[0];
  if (!choice) return undefined;
  const delta = choice.delta;
  const content = delta?.content;
  if (typeof content === "string" && content.length > 0) {
    result.content += content;
    arrived.content.push(content);
  }
  const reasoning = delta?.reasoning_content;
  if (typeof reasoning === "string" && reasoning.length > 0) {
    result.reasoning += reasoning;
    result.reasoningTokens++;
    arrived.reasoning?.push(reasoning);
  }
  for (const tc of delta?.tool_calls ?? []) assembler.push(tc);
  if (result.firstTokenAt === undefined && (result.content || result.reasoning || delta?.tool_calls?.length))
    result.firstTokenAt = performance.now();
  if (choice.finish_reason) result.finishReason = choice.finish_reason;
  return undefined;
}

/**
 * An error sent in the stream as its LlmError, classified as the same error answered as a status
 * (a request's fault restarts nothing). `data` is what carried it, quoted when the error's
 * message is not text (a server's or a proxy's own shape).
 */
function streamedError(given: unknown, data: string): LlmError {
  const error = isObject(given) ? given : {};
  const text = error.message;
  const message =
    typeof text === "string" ? serverMessage(text) : text === undefined ? "error in stream" : excerpt(data);
  return eventError(error, message);
}

/**
 * An `error:` field's value: builds before the `data: {"error": …}` event sent a later error
 * result so (server.cpp, `server_sent_event(sink, "error", …)`), the error object alone. Read as
 * that event's error; undefined for a value that is no JSON object (then it is a field of no
 * meaning, as any other unknown one).
 */
export function errorField(value: string): LlmError | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value, ESCAPED_SURROGATE.test(value) ? wellFormedString : undefined);
  } catch {
    return undefined;
  }
  return isObject(parsed) ? streamedError(parsed, value) : undefined;
}

/**
 * `usage` or `timings` as kept: their numbers, and those of an object one level down
 * (`prompt_tokens_details`), all llama-server sends there. Anything else is left out: a value
 * nested 150,000 deep fits an event parsed unlooked-at, and JSON.stringify, logging the step,
 * overflows the stack on it. Without a prototype, a `__proto__` key is a field like any other.
 * One or two such events a reply: no cost per token.
 */
function numbers(v: unknown, nested = false): Record<string, unknown> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, unknown> = Object.create(null);
  for (const key in v) {
    const x = v[key];
    if (typeof x === "number") out[key] = x;
    else if (!nested && isObject(x)) out[key] = numbers(x, true);
  }
  return out;
}

/** Values an event of llama-server's over LOOK_FROM_CHARS may hold (util/json-shape.ts). */
const MAX_EVENT_VALUES = 10_000;

/**
 * A surrogate written as a JSON escape, the only way one reaches a parsed string (the decoder
 * makes invalid UTF-8 U+FFFD). llama-server writes text as UTF-8, so this is rare and cheap to
 * look for; a lone one is made U+FFFD, as the decoder would, so the host's events, the result and
 * what is stored are the same well-formed text (docs/protocol.md "Text").
 */
const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F]/;
const wellFormedString = (_key: string, value: unknown) =>
  typeof value === "string" ? value.toWellFormed() : value;

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
    const finish = choice.finish_reason;
    // Carried to the host as output_invalid's data.finish_reason, a string or null.
    if (finish !== undefined && finish !== null && !(typeof finish === "string" && finish.length <= 64))
      return "finish_reason is not a name";
    const delta = choice.delta;
    if (delta === undefined || delta === null) continue;
    if (!isObject(delta)) return "delta is not an object";
    for (const key of ["content", "reasoning_content"] as const) {
      if (delta[key] !== undefined && delta[key] !== null && typeof delta[key] !== "string")
        return `delta.${key} is not a string`;
    }
    if (delta.tool_calls === undefined || delta.tool_calls === null) continue;
    const problem = toolCallsProblem(delta.tool_calls);
    if (problem) return problem;
  }
  return undefined;
}

function toolCallsProblem(calls: unknown): string | undefined {
  if (!Array.isArray(calls)) return "delta.tool_calls is not an array";
  for (const tc of calls) {
    if (!isObject(tc)) return "a tool call is not an object";
    // The calls are joined by it: one not a count (text, a fraction) read as 0 would join two
    // calls into one of no tool's name and no JSON arguments. Absent is the first call.
    const index = tc.index;
    if (index !== undefined && !(Number.isSafeInteger(index) && (index as number) >= 0))
      return "a tool call's index is not a whole number";
    const fn = tc.function;
    if (fn === undefined) continue;
    if (!isObject(fn)) return "a tool call's function is not an object";
    for (const key of ["name", "arguments"] as const) {
      if (fn[key] !== undefined && fn[key] !== null && typeof fn[key] !== "string")
        return `a tool call's function.${key} is not a string`;
    }
  }
  return undefined;
}
