import { type Turn, tokenize } from "../fixtures/llama-stand-in/script.ts";
import { RECORDINGS } from "../fixtures/recordings-dir.ts";
import { sseEvents, type Transcript } from "./transcript.ts";

// The recordings of test/fixtures/llama-server and what a stand-in needs to say what they say:
// replayed against the stand-in here (contract/) and through the client (llama/).

type Json = Record<string, any>;

export { RECORDINGS };
/** The server of the recordings: `-c 2048`, 4 slots, no API key. */
export const N_CTX = 2048;

/** Single-request transcripts of the routes the stand-in models (README: 02–03, 10–17, 20–26). */
export const CASES = [
  "02-health-ready.txt",
  "03-v1-health.txt",
  "10-chat-nonstream.txt",
  "11-chat-stream.txt",
  "12-chat-stream-include-usage.txt",
  "13-chat-tools-auto-nonstream.txt",
  "14-chat-tools-auto-stream.txt",
  "15-chat-tools-required-nonstream.txt",
  "16-chat-tools-required-stream.txt",
  "17-chat-tools-roundtrip-tool-message.txt",
  "20-err-malformed-json.txt",
  "20c-err-empty-body.txt",
  "21-err-missing-messages.txt",
  "21b-err-empty-messages.txt",
  "21c-err-messages-not-array.txt",
  "21d-err-bad-role.txt",
  "21e-err-bad-param-type.txt",
  "22-err-context-overflow.txt",
  "22b-err-context-overflow-stream.txt",
  "23-ctx-fills-during-generation.txt",
  "23b-ctx-fills-during-generation-stream.txt",
  "24-err-unknown-endpoint.txt",
  "24b-err-unknown-endpoint-post.txt",
  "25-err-wrong-method-get-chat.txt",
  "25b-err-wrong-method-delete-health.txt",
  "25c-err-wrong-method-post-health.txt",
  "26-text-plain-content-type.txt",
  // A thinking template (chatml_think.jinja) and structured output (README: 91–91i, 95–95d).
  "91-reasoning-stream.txt",
  "91b-reasoning-nonstream.txt",
  "91c-reasoning-disabled.txt",
  "91d-reasoning-budget.txt",
  "91g-reasoning-in-history-null.txt",
  "91i-reasoning-then-json-schema.txt",
  "95-json-schema.txt",
  "95b-json-schema-cut.txt",
  "95c-json-object.txt",
  "95d-json-schema-bad-ref.txt",
];

export const isChat = (t: Transcript) => t.path === "/v1/chat/completions" && t.method === "POST";
export const isStream = (t: Transcript) => t.headers["content-type"] === "text/event-stream";

/** The recorded reply filled the slot's context (transcripts 23, 23b): prompt + reply = n_ctx. */
export function filledContext(t: Transcript): boolean {
  const last = isStream(t)
    ? (sseEvents(t.body)
        .filter((e) => e !== "[DONE]")
        .map((e) => JSON.parse(e) as Json)
        .at(-1) as Json)
    : (JSON.parse(t.body) as Json);
  const timings = last.timings;
  return timings !== undefined && timings.cache_n + timings.prompt_n + timings.predicted_n === N_CTX;
}

/**
 * The turn that makes the stand-in say what the real model said: its tokens (streamed: exactly
 * the recorded deltas; otherwise the text cut into as many tokens as it used) and tool calls.
 * A reply that filled the context is given more than fits, as the model would have gone on.
 */
export function turnOf(t: Transcript): Turn {
  let tokens: string[] = [];
  let reasoning: string[] = [];
  let finish: string | undefined;
  const calls = new Map<number, { name: string; arguments: string; id?: string }>();
  if (isStream(t)) {
    for (const e of sseEvents(t.body)) {
      if (e === "[DONE]") continue;
      const choice = (JSON.parse(e) as Json).choices[0];
      finish ??= choice?.finish_reason ?? undefined;
      const delta = choice?.delta ?? {};
      if (typeof delta.content === "string") tokens.push(delta.content);
      if (typeof delta.reasoning_content === "string") reasoning.push(delta.reasoning_content);
      for (const tc of delta.tool_calls ?? []) {
        const call = calls.get(tc.index) ?? { name: "", arguments: "" };
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name = tc.function.name;
        call.arguments += tc.function?.arguments ?? "";
        calls.set(tc.index, call);
      }
    }
  } else {
    const body = JSON.parse(t.body) as Json;
    const message = body.choices[0].message;
    finish = body.choices[0].finish_reason;
    for (const tc of message.tool_calls ?? [])
      calls.set(calls.size, { name: tc.function.name, arguments: tc.function.arguments, id: tc.id });
    let n = body.usage.completion_tokens as number;
    if (typeof message.reasoning_content === "string") {
      // The thinking takes every token of a reply that is only thinking (91b), else its words (91i).
      reasoning =
        message.content === "" ? cut(message.reasoning_content, n) : tokenize(message.reasoning_content);
      n -= reasoning.length;
    }
    if (calls.size === 0 && message.content !== "") tokens = cut(message.content, n);
  }
  if (filledContext(t)) tokens = Array.from({ length: 40 }, () => tokens).flat();
  if (calls.size > 0) return { tool_calls: [...calls.values()] };
  return {
    content: tokens,
    ...(reasoning.length > 0 ? { reasoning } : {}),
    // The forced end of a think block counts against max_tokens unseen (91d): say how it ended.
    ...(finish === "length" && !filledContext(t) ? { finish_reason: "length" as const } : {}),
  };
}

/** `text` in `n` pieces that join back to it. */
function cut(text: string, n: number): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / n));
  const pieces: string[] = [];
  for (let i = 0; i < n; i++) pieces.push(chars.slice(i * size, (i + 1) * size).join(""));
  return pieces;
}
