import { describe, expect, test } from "bun:test";
import { MAX_ARGUMENT_CHARS } from "../../src/agent/tool-calls.ts";
import { MAX_EVENT_CHARS, MAX_REPLY_CHARS } from "../../src/llama/completion.ts";
import { ChatHarness, names, streamed } from "./harness.ts";

const delta = (d: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: d, finish_reason: finish }] })}\n\n`;

describe("chat: garbage on the wire from llama-server", () => {
  const cases: [string, string[], string][] = [
    ["a data line that is not JSON", [delta({ content: "hi" }), "data: {oops not json\n\n"], "not JSON"],
    ["data: null", ["data: null\n\n"], "not an object"],
    ["choices that is not an array", ['data: {"choices": 7}\n\n'], "choices is not an array"],
    ["a numeric content delta", [delta({ content: 42 })], "delta.content is not a string"],
    ["tool_calls that is not an array", [delta({ tool_calls: 5 })], "tool_calls is not an array"],
    ["a null tool call", [delta({ tool_calls: [null] })], "a tool call is not an object"],
    // Recorded ones are "stop", "length", "tool_calls" (transcripts/11, 16, 23b); output_invalid
    // carries it to the host as data.finish_reason, a string or null.
    [
      "a finish_reason that is an object",
      [delta({ content: "hi" }, { why: 1 } as never)],
      "finish_reason is not a name",
    ],
    [
      "a finish_reason of 100 KB",
      [delta({ content: "hi" }, "x".repeat(100_000))],
      "finish_reason is not a name",
    ],
  ];
  for (const [what, raw, named] of cases) {
    test(`${what}: internal_error naming it, the server is not blamed, the turn stays resumable`, async () => {
      await using h = new ChatHarness({ agents: [{ name: "plain" }] });
      h.llama.script({ raw: [...raw, delta({}, "stop"), "data: [DONE]\n\n"] }, { content: ["next is fine"] });
      const { terminal, events } = await h.chat(1, { input: "x", session_id: "g" });
      expect(terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response" },
      });
      expect(String(terminal.message)).toContain(named);
      expect(String(terminal.message).length).toBeLessThan(300);
      expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "llm_error" });
      // Not a crash of the server: no restart asked for.
      expect(h.provider.failures).toEqual([]);
      expect(h.checkpoint("g")).toBeDefined();
      const next = await h.chat(2, { input: "again", session_id: "g2" });
      expect(next.terminal.result).toMatchObject({ response: "next is fine" });
    });
  }

  test("a reply llama-server cannot parse (quirks/90d) is asked for again; the server is not blamed", async () => {
    await using h = new ChatHarness();
    h.llama.script({ unparsed: "<tool_call>\n<function=t__echo>\n</parameter>" }, { content: ["fine now"] });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "u" });
    expect(terminal.result).toMatchObject({ response: "fine now", warnings: [] });
    expect(h.provider.failures).toEqual([]);
    expect(names(events).filter((e) => e === "llm_done")).toHaveLength(2);
    // What it streamed, then why it goes again.
    const again = h.llama.requests[1]?.body.messages.slice(-2);
    expect(again?.[0]).toMatchObject({ role: "assistant" });
    expect(String(again?.[0]?.content)).toContain("<function=t__echo>");
    expect(again?.[1]).toMatchObject({ role: "user" });
    expect(String(again?.[1]?.content)).toContain("could not be read");
  });

  test("replies that never parse end at max_parse_errors with a result, not a restart", async () => {
    await using h = new ChatHarness();
    const bad = { unparsed: "<tool_call>broken" };
    h.llama.script(bad, bad, bad, { content: ["never asked"] });
    const { terminal, events } = await h.chat(1, { input: "x" });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "max_parse_errors" });
    expect(terminal.type).toBe("result");
    expect((terminal.result as { warnings: { code: string }[] }).warnings.map((w) => w.code)).toEqual([
      "max_parse_errors",
    ]);
    expect(h.llama.requests).toHaveLength(3);
    expect(h.provider.failures).toEqual([]);
  });

  // A 200 whose body is not an event stream (a JSON error, a proxy's page) had no event the
  // parser read: the stream "ended before the reply finished", a lost connection, and the
  // server was blamed and restarted, the same garbage awaiting each restart.
  test("a 200 whose body is not an event stream: bad_response naming it, the server not blamed", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ raw: ['{"error":{"code":500,"message":"boom","type":"server_error"}}'] });
    const { terminal } = await h.chat(1, { input: "x", session_id: "j" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "bad_response" },
    });
    expect(String(terminal.message)).toContain("not an event stream");
    expect(String(terminal.message)).toContain("boom");
    expect(h.provider.failures).toEqual([]);
  });

  test("invalid UTF-8 becomes U+FFFD and the answer arrives", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const head = 'data: {"choices":[{"index":0,"delta":{"content":"caf';
    const bad = [0xc3, 0x28, 0xff]; // raw bytes: not UTF-8
    const tail = `"},"finish_reason":null}]}\n\n${delta({}, "stop")}data: [DONE]\n\n`;
    h.llama.script({ raw: [head, bad, tail] });
    const { terminal } = await h.chat(1, { input: "x" });
    const response = (terminal.result as { response: string }).response;
    expect(response.startsWith("caf")).toBe(true);
    expect(response).toContain("\uFFFD");
  });
});

describe("chat: lone surrogates in what the model streams", () => {
  test("become U+FFFD in the events, the result, the tool call and what is stored: the same text each time", async () => {
    await using h = new ChatHarness();
    // JSON escapes, as a server could write them; a pair stays a pair.
    const odd = String.raw`a\ud800b\uDC00c\ud83d\ude00`;
    const tool = delta(
      { tool_calls: [{ index: 0, id: "k", function: { name: "t__echo", arguments: '{"text":"@"}' } }] },
      "tool_calls",
    );
    const text = delta({ reasoning_content: "@" }) + delta({ content: "@" });
    const raw = (events: string) => [events.replaceAll("@", odd), delta({}, "stop"), "data: [DONE]\n\n"];
    h.llama.script({ raw: raw(tool) }, { raw: raw(text) });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "s" });
    const expected = "a\ufffdb\ufffdc\u{1f600}";
    expect(terminal.result).toMatchObject({ response: expected, reasoning: expected });
    expect(streamed(events)).toBe(expected);
    expect(streamed(events, "llm_reasoning")).toBe(expected);
    expect(events.find((e) => e.event === "tool_start")).toMatchObject({ args: { text: expected } });
    const stored = h.history("s");
    expect(stored.at(-1)).toMatchObject({ role: "assistant", content: expected });
    expect(JSON.stringify(stored).includes("\\ud800")).toBe(false);
  });
});

describe("chat: garbage tool calls and empty replies from the model", () => {
  test("arguments that are not an object are re-prompted; the call sent back carries {} so the template can render it", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: "[1, 2]" }] },
      { tool_calls: [{ name: "t__echo", arguments: '"just a string"' }] },
      { tool_calls: [{ name: "t__echo", arguments: { text: "fixed" } }] },
      { content: ["done"] },
    );
    const { terminal, events } = await h.chat("c", { input: "x" });
    expect(terminal.result).toMatchObject({ response: "done", warnings: [] });
    const second = h.llama.requests[1]?.body.messages ?? [];
    expect(second.at(-1)?.content).toContain("must be a JSON object");
    expect(second.at(-2)).toMatchObject({
      role: "assistant",
      tool_calls: [{ function: { name: "t__echo", arguments: "{}" } }],
    });
    expect(events.filter((e) => e.event === "tool_start")).toHaveLength(1);
  });

  test("absurdly long arguments are refused without running, echoing or storing them", async () => {
    await using h = new ChatHarness();
    const huge = JSON.stringify({ text: "y".repeat(MAX_ARGUMENT_CHARS * 10) });
    h.llama.script({ tool_calls: [{ name: "t__echo", arguments: huge }] }, { content: ["sorry"] });
    const { terminal, events } = await h.chat("c", { input: "x", session_id: "long" });
    expect(terminal.result).toMatchObject({ response: "sorry" });
    expect(names(events)).not.toContain("tool_start");
    const sent = JSON.stringify(h.llama.requests[1]?.body.messages);
    expect(sent.length).toBeLessThan(5000);
    expect(sent).toContain("over the limit");
    expect(JSON.stringify(h.history("long")).length).toBeLessThan(5000);
  });

  test("an unknown tool name of any length is named (bounded) and re-prompted; past the limit the loop aborts", async () => {
    await using h = new ChatHarness();
    const call = { tool_calls: [{ name: `x${"z".repeat(5000)}`, arguments: {} }] };
    h.llama.script(call, call, call);
    const { terminal, events } = await h.chat("c", { input: "x" });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "max_parse_errors" });
    const result = terminal.result as { warnings: { code: string; message: string }[] };
    expect(result.warnings[0]?.code).toBe("max_parse_errors");
    expect(result.warnings[0]?.message.length).toBeLessThan(500);
  });

  test("an empty reply (no text, no tool call) ends with an empty response and an empty_reply warning", async () => {
    await using h = new ChatHarness();
    h.llama.script({ content: [] });
    const { terminal, events } = await h.chat("c", { input: "x" });
    expect(terminal.result).toMatchObject({ response: "", warnings: [{ code: "empty_reply" }] });
    expect(events.at(-1)).toMatchObject({ event: "final", response: "" });
    expect(h.llama.requests).toHaveLength(1);
  });
});

describe("chat: an SSE event with no end", () => {
  const over = MAX_EVENT_CHARS + 1024;
  const cases: [string, string][] = [
    ["a line with no newline", `data: ${"x".repeat(over)}`],
    [
      "data lines with no blank line after them",
      `data: ${"x".repeat(1000)}\n`.repeat(Math.ceil(over / 1000)),
    ],
  ];
  for (const [what, tail] of cases) {
    test(`${what}: bad_response once it passes the limit, not held while the server goes quiet`, async () => {
      // Without the bound the event was kept growing until the connection closed: here the
      // server keeps it open, so only the watchdog (5 s) ended the chat, blaming the server.
      await using h = new ChatHarness({ agents: [{ name: "plain" }] }, { requestTimeoutMs: 5_000 });
      h.llama.script({ raw: [delta({ content: "hi" }), tail], hang: true });
      const started = performance.now();
      const { terminal } = await h.chat(1, { input: "x", session_id: "e" });
      expect(terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response" },
      });
      expect(String(terminal.message)).toContain(`over ${MAX_EVENT_CHARS} characters`);
      expect(performance.now() - started).toBeLessThan(4_000);
      expect(h.provider.failures).toEqual([]);
      expect(h.checkpoint("e")?.partial).toMatchObject({ content: "hi" });
    });
  }
});

describe("chat: an event of many values", () => {
  test("bad_response before it is parsed; a long delta of one string is read as ever", async () => {
    // A hostile review: one 8 MiB event of 700,000 keys held the main loop 0.47 s in JSON.parse.
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const keys = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, 0]));
    h.llama.script({
      raw: [delta({ content: "hi" }), `data: ${JSON.stringify({ choices: [], ...keys })}\n\n`],
      hang: true,
    });
    const { terminal } = await h.chat(1, { input: "x" });
    expect(terminal).toMatchObject({ type: "error", data: { reason: "bad_response" } });
    expect(String(terminal.message)).toContain("JSON values");
    h.llama.script({ content: ["z".repeat(1536 * 1024)] });
    const long = await h.chat(2, { input: "y" });
    expect((long.terminal.result as { response: string }).response).toHaveLength(1536 * 1024);
  });
});

describe("chat: empty deltas without end", () => {
  test("bad_response once more events came than the context can generate; the server not blamed", async () => {
    // Each event is progress to the watchdog: without the bound this chat never ended.
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const empty = delta({ content: "" }).repeat(20_000);
    h.llama.script({ raw: [delta({ content: "hi" }), empty], hang: true });
    const { terminal } = await h.chat(1, { input: "x", session_id: "e" });
    expect(terminal).toMatchObject({ type: "error", data: { reason: "bad_response" } });
    expect(String(terminal.message)).toContain("events without text in one reply");
    expect(h.provider.failures).toEqual([]);
  });
});

describe("chat: a reply longer than the context can hold", () => {
  test("bad_response naming the bound, the server not blamed, the partial kept", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    // The stand-in's context is at most 8192 tokens: 1024 characters a token is under 8.4 M.
    const piece = delta({ content: "y".repeat(8000) });
    h.llama.script({ raw: Array.from({ length: 1100 }, () => piece), hang: true });
    const { terminal } = await h.chat(1, { input: "x", session_id: "long" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "bad_response" },
    });
    expect(String(terminal.message)).toMatch(/more than \d+ characters in one reply/);
    expect(h.provider.failures).toEqual([]);
    expect(h.checkpoint("long")?.partial?.content.length).toBeGreaterThan(0);
  });
});

describe("chat: a reply longer than a line can carry", () => {
  test("on a large context, a structured answer of valid JSON past MAX_REPLY_CHARS is bad_response, not a result no client reads", async () => {
    // 64K tokens times 1024 characters is 64 M: a 50 MB answer (and its json, again) fit that
    // bound, and the result line, the stored message and each sessions.get page holding it were
    // past what the typed client reads (docs/protocol.md "Answer sizes").
    await using h = new ChatHarness({ agents: [{ name: "plain" }] }, { standIn: () => ({ nCtx: 65536 }) });
    const piece = delta({ content: `"${"a".repeat(1_000_000)}",` });
    const pieces = Math.ceil(MAX_REPLY_CHARS / 1_000_000) + 1;
    h.llama.script({
      raw: [
        delta({ content: "[" }),
        ...Array.from({ length: pieces }, () => piece),
        delta({ content: "0]" }),
        delta({}, "stop"),
        "data: [DONE]\n\n",
      ],
    });
    const format = { type: "json_schema", schema: { type: "array" } };
    const { terminal } = await h.chat(1, { input: "x", session_id: "big", response_format: format });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "bad_response" },
    });
    expect(String(terminal.message)).toContain(`more than ${MAX_REPLY_CHARS} characters in one reply`);
    expect(h.provider.failures).toEqual([]);
    expect(h.history("big")).toEqual([]);
  });
});

// usage and timings are kept for the step's log line and the turn's counts. An event under the
// size that is looked at first (util/json-shape.ts) may still nest 150,000 objects deep, which
// JSON.parse takes and JSON.stringify overflows the stack on: the log line threw, and the whole
// turn was internal_error with no reason, its reply lost.
describe("chat: usage or timings nested deep", () => {
  const deep = `${'{"a":'.repeat(150_000)}1${"}".repeat(150_000)}`;
  for (const field of ["usage", "timings"]) {
    test(`${field}: the reply is the result, its numbers kept, the rest left out`, async () => {
      await using h = new ChatHarness({ agents: [{ name: "plain" }] });
      const extra = field === "usage" ? '"completion_tokens":2,' : '"predicted_n":2,';
      h.llama.script({
        raw: [
          delta({ content: "hi" }),
          delta({}, "stop"),
          `data: {"choices":[],"${field}":{${extra}"deep":${deep}}}\n\n`,
          "data: [DONE]\n\n",
        ],
      });
      const { terminal } = await h.chat(1, { input: "x", session_id: "d" });
      expect(terminal).toMatchObject({
        type: "result",
        result: { response: "hi", usage: { completion_tokens: 2 } },
      });
      expect(h.history("d")).toHaveLength(2);
    });
  }
});
