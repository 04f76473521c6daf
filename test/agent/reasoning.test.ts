import { describe, expect, test } from "bun:test";
import { ChatHarness, names, streamed, streamNames } from "./harness.ts";

// Thinking models in the turn (docs/agent.md#thinking-and-structured-output): the stand-in streams
// reasoning as llama-server does with a thinking template (transcripts 91–91d), the turn forwards,
// stores and sends it back.

const plain = { agents: [{ name: "plain", system_prompt: "Think." }] };
type Json = Record<string, any>;

describe("chat: reasoning", () => {
  test("reasoning streams as llm_reasoning before the chunks; the result and sessions.get carry it, later turns leave it out (91)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "Let me see. Two words.", content: "Hello there" }, { content: "Again" });
    const { terminal, events } = await h.chat("r1", { input: "hi", session_id: "s" });
    expect(streamNames(events).slice(3)).toEqual([
      "llm_start",
      "llm_reasoning",
      "llm_chunk",
      "llm_done",
      "final",
    ]);
    expect(streamed(events, "llm_reasoning")).toBe("Let me see. Two words.");
    expect(streamed(events)).toBe("Hello there");
    expect(events.find((e) => e.event === "llm_reasoning")).toMatchObject({ step: 0 });
    expect(terminal.result).toMatchObject({
      response: "Hello there",
      reasoning: "Let me see. Two words.",
      warnings: [],
    });

    h.send("g", "sessions.get", { session_id: "s" });
    const got = (await h.terminal("g")).result as { messages: Json[] };
    expect(got.messages[1]).toMatchObject({
      role: "assistant",
      content: "Hello there",
      reasoning: "Let me see. Two words.",
    });
    // The model's own history never holds it.
    expect(h.history("s")[1]).toEqual({ role: "assistant", content: "Hello there" });

    const again = await h.chat("r2", { input: "more", session_id: "s" });
    expect(again.terminal.result).toMatchObject({ response: "Again", reasoning: "" });
    const sent = h.llama.requests[1]?.body.messages as Json[];
    expect(sent.some((m) => "reasoning_content" in m)).toBe(false);
  });

  test("within a turn, a tool-calling step's reasoning goes back with its call, never as null (91f, 91g)", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { reasoning: "I need the echo tool.", tool_calls: [{ name: "t__echo", arguments: { text: "ping" } }] },
      { tool_calls: [{ name: "t__echo", arguments: { text: "pong" } }] },
      { reasoning: "Both came back.", content: "Done." },
    );
    const { terminal } = await h.chat("t1", { input: "echo twice", session_id: "s" });
    expect(terminal.result).toMatchObject({ response: "Done.", reasoning: "Both came back." });
    const second = h.llama.requests[1]?.body.messages as Json[];
    const call = second.find((m) => m.role === "assistant");
    expect(call).toMatchObject({ reasoning_content: "I need the echo tool.", tool_calls: [{}] });
    const third = h.llama.requests[2]?.body.messages as Json[];
    const calls = third.filter((m) => m.role === "assistant");
    expect(calls.map((m) => m.reasoning_content)).toEqual(["I need the echo tool.", undefined]);
    expect(calls.every((m) => !("reasoning_content" in m) || typeof m.reasoning_content === "string")).toBe(
      true,
    );
    // Stored as reasoning on each assistant message; the next turn's history has none.
    h.send("g", "sessions.get", { session_id: "s" });
    const messages = ((await h.terminal("g")).result as { messages: Json[] }).messages;
    expect(messages.filter((m) => m.role === "assistant").map((m) => m.reasoning)).toEqual([
      "I need the echo tool.",
      undefined,
      "Both came back.",
    ]);
    expect(h.history("s").some((m) => "reasoning_content" in m)).toBe(false);
  });

  test("reasoning until max_tokens: the answer is reasoning_only naming the limit, not empty_reply, and no hang (91b)", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 6 }] });
    h.llama.script({ reasoning: Array(500).fill(" hmm"), content: "never" });
    const { terminal, events } = await h.chat("m1", { input: "think hard", session_id: "s" });
    expect(terminal.type).toBe("result");
    const result = terminal.result as { response: string; reasoning: string; warnings: Json[] };
    expect(result.response).toBe("");
    expect(result.reasoning).toBe(" hmm".repeat(6));
    const codes = result.warnings.map((w) => w.code);
    expect(codes).toContain("reasoning_only");
    expect(codes).not.toContain("empty_reply");
    const warning = result.warnings.find((w) => w.code === "reasoning_only");
    expect(warning?.message).toContain("reply limit of 6 tokens");
    expect(events.filter((e) => e.event === "llm_chunk")).toEqual([]);
  });

  test("a reply that is only reasoning and stops: reasoning_only; one with neither stays empty_reply", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "Nothing to say." }, { content: "" });
    const thinking = await h.chat("e1", { input: "hi" });
    expect((thinking.terminal.result as { warnings: Json[] }).warnings.map((w) => w.code)).toEqual([
      "reasoning_only",
    ]);
    const nothing = await h.chat("e2", { input: "hi" });
    expect((nothing.terminal.result as { warnings: Json[] }).warnings.map((w) => w.code)).toEqual([
      "empty_reply",
    ]);
  });

  test("reasoning is progress: a model thinking longer than request_timeout, a token at a time, is not a wedge", async () => {
    // A token every 100 ms, 900 ms within the limit each: a loaded box cannot make one late.
    await using h = new ChatHarness(plain, { requestTimeoutMs: 1000 });
    h.llama.script({ reasoning: Array(14).fill(" step"), content: "ok", chunk_delay_ms: 100 });
    const started = Date.now();
    const { terminal } = await h.chat("w1", { input: "slowly" });
    expect(Date.now() - started).toBeGreaterThan(1000);
    expect(terminal.result).toMatchObject({ response: "ok", reasoning: " step".repeat(14) });
    expect(h.provider.failures).toEqual([]);
  });

  test("the server dies mid-thought: the crash error, the partial reasoning kept in the checkpoint (83)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({
      reasoning: "one two three four five six",
      content: "x",
      crash_after_chunks: 4,
      chunk_delay_ms: 20,
    });
    const { terminal, events } = await h.chat("d1", { input: "hi", session_id: "s" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "connection_lost" },
    });
    expect(names(events).at(-1)).toBe("loop_abort");
    const partial = events
      .filter((e) => e.event === "llm_reasoning")
      .map((e) => e.delta)
      .join("");
    // What reached the core before the connection dropped (the last chunk may go down with it).
    expect(partial).toStartWith("one two");
    expect(h.checkpoint("s")?.partial).toEqual({ step: 0, reasoning: partial, content: "" });
    // A resume runs the step again; once it succeeds the partial goes with the checkpoint.
    h.llama.script({ reasoning: "again", content: "fine" });
    const resumed = await h.chat("d2", { session_id: "s", resume: true });
    expect(resumed.terminal.result).toMatchObject({ response: "fine", reasoning: "again" });
    expect(h.checkpoint("s")).toBeUndefined();
  });
});

describe("chat: think", () => {
  const requestOf = async (think: unknown, agentThink?: unknown) => {
    await using h = new ChatHarness({
      agents: [{ name: "plain", ...(agentThink !== undefined ? { think: agentThink } : {}) }],
    });
    h.llama.script({ content: "ok" });
    const { terminal } = await h.chat("k", { input: "hi", ...(think !== undefined ? { think } : {}) });
    expect(terminal.type).toBe("result");
    const body = h.llama.requests[0]?.body as Json;
    return {
      kwargs: body.chat_template_kwargs,
      effort: body.reasoning_effort,
      budget: body.reasoning_budget_tokens,
    };
  };

  test("each value maps to llama-server's fields (91c, 91d); none asks nothing", async () => {
    expect(await requestOf(undefined)).toEqual({ kwargs: undefined, effort: undefined, budget: undefined });
    expect(await requestOf(true)).toEqual({
      kwargs: { enable_thinking: true },
      effort: undefined,
      budget: undefined,
    });
    expect(await requestOf(false)).toEqual({
      kwargs: { enable_thinking: false },
      effort: undefined,
      budget: undefined,
    });
    expect(await requestOf("high")).toEqual({
      kwargs: { enable_thinking: true },
      effort: "high",
      budget: undefined,
    });
    expect(await requestOf({ budget_tokens: 64 })).toEqual({
      kwargs: { enable_thinking: true },
      effort: undefined,
      budget: 64,
    });
  });

  test("the agent's think is the default; the chat's wins", async () => {
    expect((await requestOf(undefined, false)).kwargs).toEqual({ enable_thinking: false });
    expect(await requestOf({ budget_tokens: 8 }, "low")).toMatchObject({ effort: undefined, budget: 8 });
  });

  test("think false: the scripted thinking comes as content (91c)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "out loud" });
    const { terminal, events } = await h.chat("f", { input: "hi", think: false });
    expect(terminal.result).toMatchObject({ response: "out loud", reasoning: "" });
    expect(names(events)).not.toContain("llm_reasoning");
  });

  test("think of the wrong type is invalid_request naming think; nothing reaches llama-server", async () => {
    await using h = new ChatHarness(plain);
    for (const think of [
      "max",
      3,
      { budget: 3 },
      { budget_tokens: -1 },
      { budget_tokens: 1.5 },
      { budget_tokens: 2147483648 },
      null,
    ]) {
      const { terminal } = await h.chat(`bad-${JSON.stringify(think)}`, { input: "hi", think });
      expect(terminal).toMatchObject({ type: "error", code: "invalid_request" });
      expect(String(terminal.message)).toStartWith("params.think");
      expect((terminal.data as Json).field).toStartWith("think");
    }
    expect(h.llama.requests).toEqual([]);
  });
});
