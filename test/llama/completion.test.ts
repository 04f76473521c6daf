import { describe, expect, test } from "bun:test";
import {
  type CompletionRequest,
  type CompletionResult,
  streamCompletion,
} from "../../src/llama/completion.ts";
import { LlmError } from "../../src/llama/errors.ts";
import { FORMS } from "../contract/forms.ts";
import { CASES, filledContext, isChat, isStream, N_CTX, RECORDINGS, turnOf } from "../contract/recordings.ts";
import { readExchanges, readTranscript, shape, type Transcript } from "../contract/transcript.ts";
import { TAPE_KEY, tape } from "./tape.ts";

// The streaming chat completion (src/llama/completion.ts) against the recorded answers of a
// real llama-server, played back verbatim, and against the stand-in given the same tokens:
// the client must come to the same result from both. Each test names its recording.

type Json = Record<string, any>;

async function complete(
  endpoint: { baseUrl: string; apiKey: string },
  request: CompletionRequest,
): Promise<CompletionResult | LlmError> {
  try {
    return await streamCompletion(endpoint, request, {
      signal: new AbortController().signal,
      onDelta: () => {},
    });
  } catch (err) {
    if (err instanceof LlmError) return err;
    throw err;
  }
}

function requestOf(t: Transcript): CompletionRequest {
  const body = JSON.parse(t.requestBody) as Json;
  return { messages: body.messages, tools: body.tools, max_tokens: body.max_tokens };
}

describe("the completion against the recordings", () => {
  const transcripts = CASES.map((file) => readTranscript(RECORDINGS, file));
  // The client always streams with usage, so the recordings of streamed requests are the ones
  // a real server would answer it with; overflow is the same answer either way (22, 22b).
  const streamed = transcripts.filter(
    (t) => isChat(t) && (isStream(t) || t.body.includes("exceed_context_size_error")),
  );
  for (const t of streamed) {
    test(`${t.file}: the client reads the stand-in as it reads the recording`, async () => {
      const request = requestOf(t);
      using recorded = tape(t);
      const fromTape = await complete(recorded, request);
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

  test("12-chat-stream-include-usage.txt: content, finish, timings and usage as recorded; the key and the stream options are sent", async () => {
    const t = readTranscript(RECORDINGS, "12-chat-stream-include-usage.txt");
    using recorded = tape(t);
    const deltas: string[] = [];
    const r = await streamCompletion(recorded, requestOf(t), {
      signal: new AbortController().signal,
      onDelta: (d) => deltas.push(d),
    });
    expect(deltas.join("")).toBe(r.content);
    expect(r.content.length).toBeGreaterThan(0);
    expect(r.finishReason).toBe("length");
    expect(r.usage?.completion_tokens).toBe(deltas.length);
    expect(typeof r.timings?.predicted_n).toBe("number");
    const asked = recorded.asked[0];
    expect(asked?.authorization).toBe(`Bearer ${TAPE_KEY}`);
    expect(JSON.parse(asked?.body ?? "{}")).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  test("16-chat-tools-required-stream.txt: tool-call fragments are joined by index", async () => {
    const t = readTranscript(RECORDINGS, "16-chat-tools-required-stream.txt");
    using recorded = tape(t);
    const r = await streamCompletion(recorded, requestOf(t), {
      signal: new AbortController().signal,
      onDelta: () => {},
    });
    expect(r.finishReason).toBe("tool_calls");
    expect(r.toolCalls.length).toBeGreaterThan(0);
    expect(() => JSON.parse(r.toolCalls[0]?.function.arguments ?? "")).not.toThrow();
  });

  test("22b-err-context-overflow-stream.txt: overflow before any event, with the token counts", async () => {
    const t = readTranscript(RECORDINGS, "22b-err-context-overflow-stream.txt");
    using recorded = tape(t);
    const err = await complete(recorded, requestOf(t));
    expect(err).toBeInstanceOf(LlmError);
    expect(err).toMatchObject({ kind: "context_overflow", data: { n_prompt_tokens: 3210, n_ctx: 2048 } });
  });
});

describe("reasoning (a thinking template)", () => {
  const stream = async (file: string, onReasoning?: (d: string) => void) => {
    const t = readTranscript(RECORDINGS, file);
    using recorded = tape(t);
    const content: string[] = [];
    const result = await streamCompletion(recorded, requestOf(t), {
      signal: new AbortController().signal,
      onDelta: (d) => content.push(d),
      onReasoning,
    });
    return { result, content };
  };

  test("91-reasoning-stream.txt: the text is reasoning, content stays empty; onReasoning hears each delta", async () => {
    const thought: string[] = [];
    const { result, content } = await stream("91-reasoning-stream.txt", (d) => thought.push(d));
    expect(result.content).toBe("");
    expect(content).toEqual([]);
    expect(thought.length).toBe(8);
    // One delta per token: the count llama-server does not report apart (timings say 8 in all).
    expect(result.reasoningTokens).toBe(8);
    expect(thought.join("")).toBe(result.reasoning);
    expect(result.reasoning.startsWith(" ő")).toBe(true);
    expect(result.finishReason).toBe("length");
  });

  test("91d-reasoning-budget.txt: reasoning first, then content, each to its own listener", async () => {
    const order: string[] = [];
    const { result, content } = await stream("91d-reasoning-budget.txt", (d) => order.push(`r:${d}`));
    expect(result.reasoning.length).toBeGreaterThan(0);
    expect(result.content).toBe(content.join(""));
    expect(result.content.length).toBeGreaterThan(0);
    expect(order.every((o) => o.startsWith("r:"))).toBe(true);
  });

  test("91c-reasoning-disabled.txt: thinking off, everything is content; without a listener reasoning is only gathered", async () => {
    const off = await stream("91c-reasoning-disabled.txt");
    expect(off.result.reasoning).toBe("");
    expect(off.result.content).toBe(off.content.join(""));
    const quiet = await stream("91-reasoning-stream.txt");
    expect(quiet.result.reasoning.length).toBeGreaterThan(0);
    expect(quiet.content).toEqual([]);
  });
});

describe("the completion's failures", () => {
  const sse = (...events: string[]) => ({
    status: 200,
    headers: { "content-type": "text/event-stream" },
    body: events.map((e) => `data: ${e}\n\n`).join(""),
  });

  test("an error event mid-stream is server_error with its message", async () => {
    using t = tape(sse('{"choices":[{"delta":{"content":"a"}}]}', '{"error":{"message":"boom"}}'));
    const err = await complete(t, { messages: [] });
    expect(err).toMatchObject({ kind: "server_error", message: "llama-server: boom" });
  });

  test("quirks/90d: a stream that ends in the unparsed reply's error event is unparsed_reply, after its deltas", async () => {
    const [t] = readExchanges(RECORDINGS, "quirks/90d-unparsed-reply-stream.txt");
    using recorded = tape(t!);
    const content: string[] = [];
    const err = await streamCompletion(recorded, requestOf(t!), {
      signal: new AbortController().signal,
      onDelta: (d) => content.push(d),
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: "bad_response", data: { problem: "unparsed_reply" } });
    expect((err as Error).message).toContain("does not match the expected peg-native format");
    expect(content.join("")).toContain("capybara");
  });

  test("an event that is not JSON, or of another shape, is bad_response naming it", async () => {
    using garbage = tape(sse("{nope"));
    expect(await complete(garbage, { messages: [] })).toMatchObject({ kind: "bad_response" });
    using shaped = tape(sse('{"choices":[{"delta":{"content":7}}]}'));
    const err = await complete(shaped, { messages: [] });
    expect(err).toMatchObject({ kind: "bad_response" });
    expect((err as LlmError).message).toContain("delta.content is not a string");
    using thinking = tape(sse('{"choices":[{"delta":{"reasoning_content":{}}}]}'));
    const odd = await complete(thinking, { messages: [] });
    expect((odd as LlmError).message).toContain("delta.reasoning_content is not a string");
  });

  test("a stream that ends before a finish is connection_lost", async () => {
    using t = tape(sse('{"choices":[{"delta":{"content":"a"}}]}'));
    expect(await complete(t, { messages: [] })).toMatchObject({ kind: "connection_lost" });
  });

  test("nothing listening is connection_lost; an aborted signal is thrown as its reason", async () => {
    const t = tape();
    const closed = { baseUrl: t.baseUrl, apiKey: "" };
    t[Symbol.dispose]();
    expect(await complete(closed, { messages: [] })).toMatchObject({ kind: "connection_lost" });
    const abort = new AbortController();
    const reason = new Error("cancelled");
    abort.abort(reason);
    const thrown = await streamCompletion(
      closed,
      { messages: [] },
      { signal: abort.signal, onDelta: () => {} },
    ).catch((e) => e);
    expect(thrown).toBe(reason);
  });
});

describe("progress while the prompt is read (transcripts/98)", () => {
  test("98-return-progress-stream.txt: its events are progress, not content nor the first token; the core does not ask for them", async () => {
    const t = readTranscript(RECORDINGS, "98-return-progress-stream.txt");
    using recorded = tape(t);
    let progress = 0;
    const deltas: string[] = [];
    const r = await streamCompletion(recorded, requestOf(t), {
      signal: new AbortController().signal,
      onDelta: (d) => deltas.push(d),
      onProgress: () => progress++,
    });
    expect(r.content).toBe(deltas.join(""));
    expect(r.content.length).toBeGreaterThan(0);
    expect(r.finishReason).toBe("length");
    expect(progress).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(recorded.asked[0]?.body ?? "{}")).not.toHaveProperty("return_progress");
  });

  test("the stand-in sends them as 98 shows: as the slot starts and once the prompt is read", async () => {
    const standIn = await FORMS[0]?.start({ open: true, nCtx: N_CTX, script: [{ content: "a b" }] });
    if (!standIn) throw new Error("no stand-in form");
    try {
      const res = await fetch(`${standIn.baseUrl}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          messages: [{ role: "user", content: "x y z" }],
          stream: true,
          return_progress: true,
        }),
      });
      const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: {"));
      const progress = events.map((e) => JSON.parse(e.slice(6)).prompt_progress).filter(Boolean);
      expect(progress).toHaveLength(2);
      expect(progress[0]).toMatchObject({ cache: 0, processed: 0 });
      expect(progress[1].processed).toBe(progress[1].total);
      expect(JSON.parse(events[2]?.slice(6) ?? "{}").prompt_progress).toBeUndefined();
    } finally {
      standIn.stop();
    }
  });
});
