import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { LlmError, streamCompletion } from "../../src/agent/llm-client.ts";
import type { Turn } from "../fixtures/llama-stand-in/script.ts";
import { SHARED_DIR } from "../fixtures/shared.ts";
import { FORMS, type RunningStandIn } from "./forms.ts";
import { chunkKind, readTranscript, shape, sseEvents, type Transcript } from "./transcript.ts";

// The recorded request bodies of ../shared/llama-server replayed against the stand-in, whose
// answers must have the recorded shape: status, the headers that matter, SSE framing and the
// fields of every kind of event, error bodies. The "model" output is taken from the recording
// itself (its tokens, its tool calls), so the comparison is about llama-server, not the model.
// Then the same through the project's LLM client, against the stand-in and against the
// recorded bytes played back verbatim: the client must come to the same result from both.

const RECORDINGS = join(SHARED_DIR, "llama-server");
const present = existsSync(join(RECORDINGS, "transcripts")) && existsSync(join(RECORDINGS, "bodies"));
/** The server of the recordings: `-c 2048`, 4 slots, no API key. */
const N_CTX = 2048;

/** Single-request transcripts of the routes the stand-in models (README: 02–03, 10–17, 20–26). */
const CASES = [
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
];

type Json = Record<string, any>;

const isChat = (t: Transcript) => t.path === "/v1/chat/completions" && t.method === "POST";
const isStream = (t: Transcript) => t.headers["content-type"] === "text/event-stream";

/** The recorded reply filled the slot's context (transcripts 23, 23b): prompt + reply = n_ctx. */
function filledContext(t: Transcript): boolean {
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
function turnOf(t: Transcript): Turn {
  let tokens: string[] = [];
  const calls = new Map<number, { name: string; arguments: string; id?: string }>();
  if (isStream(t)) {
    for (const e of sseEvents(t.body)) {
      if (e === "[DONE]") continue;
      const delta = (JSON.parse(e) as Json).choices[0]?.delta ?? {};
      if (typeof delta.content === "string") tokens.push(delta.content);
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
    for (const tc of message.tool_calls ?? [])
      calls.set(calls.size, { name: tc.function.name, arguments: tc.function.arguments, id: tc.id });
    if (calls.size === 0) tokens = cut(message.content, body.usage.completion_tokens);
  }
  if (filledContext(t)) tokens = Array.from({ length: 40 }, () => tokens).flat();
  return calls.size > 0 ? { tool_calls: [...calls.values()] } : { content: tokens };
}

/** `text` in `n` pieces that join back to it. */
function cut(text: string, n: number): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / n));
  const pieces: string[] = [];
  for (let i = 0; i < n; i++) pieces.push(chars.slice(i * size, (i + 1) * size).join(""));
  return pieces;
}

/** The request as curl made it. */
function replay(s: RunningStandIn, t: Transcript): Promise<Response> {
  const headers: Record<string, string> = {};
  if (t.contentType) headers["Content-Type"] = t.contentType;
  return fetch(`${s.baseUrl}${t.path}`, {
    method: t.method,
    headers,
    body: t.method === "GET" || t.method === "DELETE" ? undefined : t.requestBody,
  });
}

/** What a streamed reply says, for comparing the stand-in's with the recording's. */
function readStream(body: string) {
  const events = sseEvents(body);
  const kinds = events.map(chunkKind);
  const chunks = events.filter((e) => e !== "[DONE]").map((e) => JSON.parse(e) as Json);
  const byKind = new Map<string, unknown>();
  events.forEach((e, i) => {
    const kind = kinds[i] as string;
    if (!byKind.has(kind)) byKind.set(kind, e === "[DONE]" ? e : shape(JSON.parse(e)));
  });
  const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
  return {
    /** The kinds in order, runs of one kind collapsed: role, content…, finish, usage, done. */
    pattern: kinds.filter((k, i) => k !== kinds[i - 1]),
    byKind: Object.fromEntries(byKind),
    content: deltas.filter((d) => typeof d.content === "string").map((d) => d.content as string),
    toolCalls: deltas.flatMap((d) => d.tool_calls ?? []) as Json[],
    finish: chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason,
    last: chunks.at(-1) as Json,
  };
}

function expectSameResponse(t: Transcript, status: number, headers: Headers, body: string): void {
  expect(status).toBe(t.status);
  expect(headers.get("content-type")).toBe(t.headers["content-type"] as string);
  expect(headers.get("server")).toBe(t.headers.server as string);
  if (isStream(t)) {
    expect(headers.get("x-accel-buffering")).toBe(t.headers["x-accel-buffering"] as string);
    const recorded = readStream(t.body);
    const got = readStream(body); // throws on any framing but `data: <json>\n\n`
    expect(got.pattern).toEqual(recorded.pattern);
    expect(got.byKind).toEqual(recorded.byKind);
    expect(got.finish).toBe(recorded.finish);
    if (filledContext(t)) {
      // Timings ride on the last chunk, with usage or without (11, 12).
      expect(got.last.timings.prompt_n + got.last.timings.predicted_n).toBe(N_CTX);
    } else expect(got.content).toEqual(recorded.content);
    const args = (calls: Json[]) => calls.map((c) => c.function.arguments).join("");
    expect(args(got.toolCalls)).toBe(args(recorded.toolCalls));
    expect(got.toolCalls[0]?.id).toBe(recorded.toolCalls[0]?.id);
    return;
  }
  const recorded = JSON.parse(t.body) as Json;
  const got = JSON.parse(body) as Json;
  expect(shape(got)).toEqual(shape(recorded));
  if (recorded.error) {
    expect(got.error.type).toBe(recorded.error.type);
    expect(got.error.code).toBe(recorded.error.code);
    if (recorded.error.n_ctx !== undefined) {
      expect(got.error.n_ctx).toBe(recorded.error.n_ctx);
      expect(got.error.n_prompt_tokens).toBeGreaterThan(got.error.n_ctx);
    }
  }
  if (recorded.choices) {
    expect(got.choices[0].finish_reason).toBe(recorded.choices[0].finish_reason);
    if (filledContext(t)) expect(got.usage.total_tokens).toBe(N_CTX);
    else expect(got.choices[0].message).toEqual(recorded.choices[0].message);
  }
}

describe.skipIf(!present)("recorded llama-server exchanges replayed against the stand-in", () => {
  const transcripts = present ? CASES.map((file) => readTranscript(RECORDINGS, file)) : [];
  // Turns in request order: only the requests that reach generation consume one.
  const script = transcripts.filter((t) => isChat(t) && t.status === 200).map(turnOf);

  for (const form of FORMS) {
    describe(form.name, () => {
      let s: RunningStandIn;
      beforeAll(async () => {
        s = await form.start({ open: true, nCtx: N_CTX, script });
      });
      afterAll(() => s.stop());

      for (const t of transcripts) {
        test(`${t.file}: ${t.method} ${t.path}${t.bodyFile ? ` with ${t.bodyFile}` : ""} → ${t.status}`, async () => {
          const res = await replay(s, t);
          expectSameResponse(t, res.status, res.headers, await res.text());
        });
      }
    });
  }

  describe("through the LLM client (src/agent/llm-client.ts)", () => {
    // The client always streams with usage, so the recordings of streamed requests are the ones
    // a real server would answer it with; overflow is the same answer either way (22, 22b).
    const streamed = transcripts.filter(
      (t) => isChat(t) && (isStream(t) || t.body.includes("exceed_context_size_error")),
    );
    for (const t of streamed) {
      test(`${t.file}: the client reads the stand-in as it reads the recording`, async () => {
        const body = JSON.parse(t.requestBody) as Json;
        const request = { messages: body.messages, tools: body.tools, max_tokens: body.max_tokens };
        const fromTape = await complete(await tape(t), request);
        const standIn = await FORMS[0]?.start({
          open: true,
          nCtx: N_CTX,
          script: t.status === 200 ? [turnOf(t)] : [],
        });
        if (!standIn) throw new Error("no stand-in form");
        const fromStandIn = await complete(standIn, request).finally(() => standIn.stop());
        if (fromTape instanceof LlmError || fromStandIn instanceof LlmError) {
          expect(fromStandIn).toBeInstanceOf(LlmError);
          expect(fromTape).toBeInstanceOf(LlmError);
          const [a, b] = [fromStandIn, fromTape] as LlmError[];
          expect(a?.kind).toBe(b?.kind as LlmError["kind"]);
          expect(Object.keys(a?.data ?? {})).toEqual(Object.keys(b?.data ?? {}));
          expect(a?.data.n_ctx).toBe(b?.data.n_ctx);
          return;
        }
        expect(fromStandIn.finishReason).toBe(fromTape.finishReason);
        expect(fromStandIn.toolCalls).toEqual(fromTape.toolCalls);
        if (!filledContext(t)) expect(fromStandIn.content).toBe(fromTape.content);
        expect(Object.keys(fromStandIn.timings ?? {})).toEqual(Object.keys(fromTape.timings ?? {}));
        if (fromTape.usage) expect(shape(fromStandIn.usage)).toEqual(shape(fromTape.usage));
      });
    }
  });
});

if (!present) {
  test.skip(`recorded llama-server exchanges: ${RECORDINGS} is absent, skipped`, () => {});
}

type Completion = Awaited<ReturnType<typeof streamCompletion>>;

async function complete(
  endpoint: { baseUrl: string; apiKey: string },
  request: Parameters<typeof streamCompletion>[1],
): Promise<Completion | LlmError> {
  try {
    return await streamCompletion(endpoint, request, new AbortController().signal, () => {});
  } catch (err) {
    if (err instanceof LlmError) return err;
    throw err;
  }
}

/** A server that answers the recorded response byte for byte, whatever it is asked. */
async function tape(t: Transcript): Promise<{ baseUrl: string; apiKey: string }> {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      queueMicrotask(() => server.stop());
      return new Response(t.body, {
        status: t.status,
        headers: { "Content-Type": t.headers["content-type"] as string },
      });
    },
  });
  return { baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "" };
}
