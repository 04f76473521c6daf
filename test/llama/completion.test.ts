import { describe, expect, test } from "bun:test";
import {
  type CompletionRequest,
  type CompletionResult,
  STREAM_FIELDS,
  streamCompletion,
} from "../../src/llama/completion.ts";
import { LlmError, MAX_SERVER_MESSAGE_CHARS } from "../../src/llama/errors.ts";
import { FORMS } from "../contract/forms.ts";
import { CASES, filledContext, isChat, isStream, N_CTX, RECORDINGS, turnOf } from "../contract/recordings.ts";
import { readExchanges, readTranscript, shape, sseEvents, type Transcript } from "../contract/transcript.ts";
import type { Turn } from "../fixtures/llama-stand-in/script.ts";
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

  // An error event carries what the status answer would have (server-common.cpp
  // format_error_response; server-task.cpp adds an overflow's counts): classified the same.
  test("an error event is classified by its code and type as the same error answered as a status", async () => {
    const cases: [string, Record<string, unknown>][] = [
      ['{"code":400,"message":"bad","type":"invalid_request_error"}', { kind: "bad_response", status: 400 }],
      ['{"type":"invalid_request_error","message":"bad"}', { kind: "bad_response", status: 400 }],
      [
        '{"code":400,"message":"too long","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}',
        { kind: "context_overflow", data: { n_prompt_tokens: 9000, n_ctx: 8192 } },
      ],
      [
        '{"code":500,"message":"Compute error.","type":"server_error"}',
        { kind: "server_error", status: 500 },
      ],
      ['{"code":503,"message":"busy","type":"unavailable_error"}', { kind: "server_error", status: 503 }],
      ['{"code":"400","message":"odd"}', { kind: "server_error", status: undefined }],
      ['{"code":400.5,"message":"odd"}', { kind: "server_error", status: undefined }],
      ['"boom"', { kind: "server_error", message: "llama-server: error in stream" }],
    ];
    for (const [error, expected] of cases) {
      using t = tape(sse('{"choices":[{"delta":{"content":"a"}}]}', `{"error":${error}}`));
      expect(await complete(t, { messages: [] })).toMatchObject(expected);
    }
  });

  test("an error event's message of megabytes reaches the host cut, not whole", async () => {
    const long = JSON.stringify({ error: { message: "m".repeat(5_000_000) } });
    using t = tape(sse('{"choices":[{"delta":{"content":"a"}}]}', long));
    const err = await complete(t, { messages: [] });
    expect(err).toMatchObject({ kind: "server_error" });
    expect((err as Error).message.length).toBeLessThan(MAX_SERVER_MESSAGE_CHARS + 100);
  });

  test("an error event whose message is not text is shown by its event, not as [object Object]", async () => {
    using t = tape(sse('{"choices":[{"delta":{"content":"a"}}]}', '{"error":{"message":{"detail":"boom"}}}'));
    const err = await complete(t, { messages: [] });
    expect(err).toMatchObject({ kind: "server_error" });
    expect((err as Error).message).not.toContain("[object Object]");
    expect((err as Error).message).toContain("boom");
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

  // A tool call's index is a number in every recording (14, 16); one sent as text was read as 0,
  // joining two calls into one of a name no tool has and arguments that are no JSON.
  test("a tool call whose index is not a whole number is bad_response, not merged into call 0", async () => {
    for (const index of ['"1"', "-1", "1.5", "null"]) {
      using t = tape(
        sse(
          '{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read","arguments":"{}"}}]}}]}',
          `{"choices":[{"delta":{"tool_calls":[{"index":${index},"id":"b","function":{"name":"write","arguments":"{}"}}]}}]}`,
          '{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}',
          "[DONE]",
        ),
      );
      const err = await complete(t, { messages: [] });
      expect(err).toMatchObject({ kind: "bad_response" });
      expect((err as LlmError).message).toContain("index is not");
    }
  });

  // JSON.stringify kept a bidi override or C1 control from the stream (the model's own text)
  // raw in the message the host shows.
  test("the quoted excerpt of a bad event has its bidi overrides and C1 controls escaped", async () => {
    using garbage = tape(sse("{nope \u202e\u0085\u2028"));
    const message = ((await complete(garbage, { messages: [] })) as LlmError).message;
    expect(message).toContain('"{nope \\u{202e}\\u{85}\\u{2028}"');
    for (const c of "\u202e\u0085\u2028") expect(message).not.toContain(c);
  });

  // `data:` with nothing after it dispatches an event of no data (the SSE spec): it carries no
  // token, no error and no JSON, as a ping (`:`, transcripts/67) carries none; it failed the turn.
  test("an event of empty data is nothing, as a ping is: the reply goes on", async () => {
    using t = tape({
      status: 200,
      headers: { "content-type": "text/event-stream" },
      body:
        'data:\n\ndata: {"choices":[{"delta":{"content":"a"}}]}\n\ndata:\n\n' +
        'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata:\n\ndata: [DONE]\n\n',
    });
    const result = await complete(t, { messages: [] });
    expect(result).toMatchObject({ content: "a", finishReason: "stop" });
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

/** A streamed body's events, parsed, [DONE] left out. */
const eventsOf = (body: string): Json[] =>
  sseEvents(body)
    .filter((e) => e !== "[DONE]")
    .map((e) => JSON.parse(e) as Json);

/** What the stand-in streams for `turn` to a user who `said`, asked as the core asks. */
async function standInEvents(turn: Turn, said: string): Promise<Json[]> {
  const standIn = await FORMS[0]?.start({ open: true, nCtx: N_CTX, script: [turn] });
  if (!standIn) throw new Error("no stand-in form");
  try {
    const res = await fetch(`${standIn.baseUrl}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: said }], ...STREAM_FIELDS }),
    });
    return eventsOf(await res.text());
  } finally {
    standIn.stop();
  }
}

describe("progress while the prompt is read (transcripts/98, 98b, 98c)", () => {
  test("98-return-progress-stream.txt: its events are progress, not content nor the first token; the core asks for them", async () => {
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
    expect(JSON.parse(recorded.asked[0]?.body ?? "{}")).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
      return_progress: true,
    });
  });

  // 98b: a prompt read in 30 batches, as the core asks now. The 31 progress events carry no
  // content, timings nor usage: no delta handed on, no first token, the final chunks' numbers kept.
  test("98b-return-progress-long-prompt.txt: the deltas and the numbers are the tokens' and the final chunks' alone", async () => {
    const [cold, again] = readExchanges(RECORDINGS, "98b-return-progress-long-prompt.txt");
    for (const t of [cold, again]) {
      if (!t) throw new Error("98b holds two exchanges");
      const events = eventsOf(t.body);
      const progress = events.filter((e) => e.prompt_progress);
      expect(progress.length).toBeGreaterThanOrEqual(2);
      using recorded = tape(t);
      const deltas: string[] = [];
      const r = await streamCompletion(recorded, requestOf(t), {
        signal: new AbortController().signal,
        onDelta: (d) => deltas.push(d),
      });
      const tokens = events.flatMap((e) => e.choices?.[0]?.delta?.content ?? []);
      expect(deltas).toEqual(tokens);
      expect(deltas.every((d) => d.length > 0)).toBe(true);
      expect(r.content).toBe(tokens.join(""));
      const last = events.at(-1) as Json;
      expect(r.usage).toEqual(last.usage);
      expect(r.timings).toEqual(last.timings);
      expect(r.finishReason).toBe("length");
      expect(r.ttftMs).toBeGreaterThanOrEqual(0);
    }
  });

  // 98c: asked with timings_per_token (the core does not), the progress events carry the
  // prompt's timings so far; the final chunk's are the reply's.
  test("98c-return-progress-timings-per-token.txt: the timings kept are the last chunk's, not a progress event's", async () => {
    const t = readTranscript(RECORDINGS, "98c-return-progress-timings-per-token.txt");
    const events = eventsOf(t.body);
    expect(events.find((e) => e.prompt_progress)?.timings).toBeDefined();
    using recorded = tape(t);
    const r = await streamCompletion(recorded, requestOf(t), {
      signal: new AbortController().signal,
      onDelta: () => {},
    });
    expect(r.timings).toEqual((events.at(-1) as Json).timings);
  });

  test("the stand-in asked with prompt_batches sends them as 98b shows: one as the slot starts, one a batch, then the first token", async () => {
    const t = readExchanges(RECORDINGS, "98b-return-progress-long-prompt.txt")[0] as Transcript;
    const recorded = eventsOf(t.body);
    const events = await standInEvents({ content: "a b", prompt_batches: 3 }, "one two three four five six");
    const progress = events.filter((e) => e.prompt_progress);
    expect(progress).toHaveLength(4);
    expect(shape(progress)).toEqual(shape(recorded.filter((e) => e.prompt_progress)));
    const processed = progress.map((e) => e.prompt_progress.processed);
    expect(processed).toEqual([...processed].sort((a, b) => a - b));
    expect(processed.at(-1)).toBe(progress[0]?.prompt_progress.total);
    // The plain role delta, then the tokens, as after 98b's last progress event.
    expect(shape(events[4])).toEqual(shape(recorded.find((e) => !e.prompt_progress)));
    expect(events[5]?.choices[0].delta.content).toBe("a");
  });

  test("the stand-in sends them as 98 shows: as the slot starts and once the prompt is read", async () => {
    const events = await standInEvents({ content: "a b" }, "x y z");
    const progress = events.map((e) => e.prompt_progress).filter(Boolean);
    expect(progress).toHaveLength(2);
    expect(progress[0]).toMatchObject({ cache: 0, processed: 0 });
    expect(progress[1].processed).toBe(progress[1].total);
    expect(events[2]?.prompt_progress).toBeUndefined();
  });
});
