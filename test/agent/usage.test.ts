import { describe, expect, test } from "bun:test";
import { TurnUsage } from "../../src/agent/turn/usage.ts";
import { ChatHarness } from "./harness.ts";

// docs/agent.md#prompt-reuse: every chat result says what the turn cost, from llama-server's own
// counters, summed over its steps, and the answer is stored with it (sessions.get).

describe("usage", () => {
  test("llama-server's usage and timings as the protocol's fields (transcripts/92, turn 2)", () => {
    const u = new TurnUsage();
    u.add({
      usage: {
        completion_tokens: 8,
        prompt_tokens: 54,
        total_tokens: 62,
        prompt_tokens_details: { cached_tokens: 34 },
      },
      timings: { cache_n: 34, prompt_n: 20, prompt_ms: 2.286, predicted_n: 8, predicted_ms: 4.74 },
      ttftMs: 6.5,
    });
    expect(u.total()).toEqual({
      prompt_tokens: 54,
      cached_tokens: 34,
      completion_tokens: 8,
      prompt_ms: 2.29,
      ttft_ms: 6.5,
      tokens_per_s: 1687.76,
    });
  });

  test("summed over steps; ttft is the first step's; what no step reported stays out", () => {
    const u = new TurnUsage();
    u.add({
      usage: undefined,
      timings: { cache_n: 0, prompt_n: 40, predicted_n: 10, predicted_ms: 10 },
      ttftMs: 30,
    });
    u.add({
      usage: undefined,
      timings: { cache_n: 45, prompt_n: 5, predicted_n: 10, predicted_ms: 30 },
      ttftMs: 4,
    });
    expect(u.total()).toEqual({
      prompt_tokens: 90,
      cached_tokens: 45,
      completion_tokens: 20,
      ttft_ms: 30,
      tokens_per_s: 500,
    });
    expect(new TurnUsage().total()).toEqual({});
    const odd = new TurnUsage();
    odd.add({ usage: { prompt_tokens: -1, completion_tokens: Number.NaN }, timings: undefined });
    expect(odd.total()).toEqual({});
    // What JSON can carry but no server measures: never a null (Infinity) or a fractional count.
    const huge = new TurnUsage();
    huge.add({
      usage: { prompt_tokens: 1e308, completion_tokens: 1.5 },
      timings: { prompt_ms: 1e308, cache_n: 2 ** 60, predicted_n: 5, predicted_ms: 1e-320 },
    });
    huge.add({ usage: { prompt_tokens: 1e308 }, timings: { prompt_ms: 1e308 } });
    const total = huge.total();
    expect(JSON.parse(JSON.stringify(total))).toEqual(total);
    expect(total).toEqual({ completion_tokens: 5 });
  });

  test("a two-step chat's result carries the sum, and sessions.get shows it on the answer", async () => {
    await using h = new ChatHarness({ agents: [{ name: "a", system_prompt: "Be brief.", tools: ["t.*"] }] });
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "x" } }] },
      { content: "The echo said x." },
    );
    const { terminal } = await h.chat("c1", { input: "echo x please", session_id: "s1" });
    const usage = (terminal.result as { usage: Record<string, number> }).usage;
    const [first, second] = h.llama.requests.map((r) => r.body);
    expect(first && second).toBeTruthy();
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    // The second step's prompt extends the first's: llama-server took that part from its cache.
    expect(usage.cached_tokens).toBeGreaterThan(0);
    expect(usage.cached_tokens).toBeLessThan(usage.prompt_tokens as number);
    expect(usage.ttft_ms).toBeGreaterThanOrEqual(0);
    expect(usage.tokens_per_s).toBeGreaterThan(0);
    h.send("g", "sessions.get", { session_id: "s1" });
    const got = await h.terminal("g");
    const messages = (got.result as { messages: { role: string; usage?: unknown }[] }).messages;
    expect(messages.at(-1)).toMatchObject({ role: "assistant", usage });
    expect(messages.filter((m) => m.usage !== undefined)).toHaveLength(1);
  });
});
