import { describe, expect, test } from "bun:test";
import type { TurnContext, TurnDeps } from "../../../src/agent/turn/context.ts";
import { endTurn, type TurnEnding } from "../../../src/agent/turn/ending.ts";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { TurnUsage } from "../../../src/agent/turn/usage.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { LlmError } from "../../../src/llama/errors.ts";
import { CoreError } from "../../../src/protocol/errors.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** A turn at step 2 with best text "so far", its events recorded, memory off. */
async function turnAt(options: { settles?: boolean; aborted?: boolean } = {}) {
  const dir = tmpdir("local-ai-ending-");
  const config = ConfigSchema.parse({ memory: { enabled: false } });
  const events: { event: string; fields: unknown }[] = [];
  const abort = new AbortController();
  if (options.aborted) abort.abort(new CoreError("cancelled", "cancelled by the host"));
  const deps = {
    config,
    dataDir: dir.path,
    emit: (event: string, fields: unknown) => events.push({ event, fields }) > 0,
    signal: abort.signal,
    settle: () => options.settles ?? true,
    now: () => new Date(0),
    // The turn's own store: its ending takes the database's reset there (docs/agent.md, The store).
    store: () => store,
  } as unknown as TurnDeps;
  const store = Store.open(dir.path);
  const key = { userId: "u", sessionId: "s" };
  const { value: session, release } = await store.lease("u", "s", AbortSignal.timeout(5000), () =>
    TurnSession.begin(store, key, { traceId: "t1", input: "hi", agent: "a", resume: false }, [], deps.now),
  );
  session.state.best_text = "so far";
  const ctx: TurnContext = {
    params: { user_id: "u", input: "hi", resume: false, approve_execution: false, regenerate: false },
    deps,
    agent: config.agents[0] as TurnContext["agent"],
    sessionId: "s",
    traceId: "t1",
    warnings: [],
    session,
    step: 2,
    usage: new TurnUsage(),
    sources: [],
  };
  return {
    dir: {
      [Symbol.dispose]() {
        release();
        store.close();
        dir[Symbol.dispose]();
      },
    },
    ctx,
    events,
    history: () => {
      const h = store.conversations.history("u", "s");
      return h.length > 0 ? h : undefined;
    },
    hasCheckpoint: () => store.conversations.checkpoint("u", "s") !== undefined,
  };
}

async function thrown(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}

describe("endTurn: each ending emits at most one terminal event", () => {
  const committed: [string, TurnEnding, string, string, string[]][] = [
    [
      "answered",
      { kind: "answered", step: 2, response: "hello", cappedAt: undefined, reasoning: "" },
      "final",
      "hello",
      [],
    ],
    [
      "an empty answer",
      { kind: "answered", step: 2, response: " ", cappedAt: undefined, reasoning: "" },
      "final",
      " ",
      ["empty_reply"],
    ],
    [
      "an answer at our cap",
      { kind: "answered", step: 2, response: "he", cappedAt: 5, reasoning: "" },
      "final",
      "he",
      ["reply_truncated"],
    ],
    [
      "context_full",
      { kind: "context_full", step: 2, response: "cut", contextSize: 512, reasoning: "" },
      "final",
      "cut",
      ["context_full"],
    ],
    [
      "context_outgrown",
      { kind: "context_outgrown", step: 2, promptTokens: 900, slot: 512 },
      "final",
      "so far",
      ["context_full"],
    ],
    ["max_steps", { kind: "max_steps", step: 2, limit: 3 }, "loop_abort", "so far", ["max_steps"]],
    [
      "max_parse_errors",
      { kind: "max_parse_errors", step: 2, count: 3, limit: 2, problems: "invalid JSON" },
      "loop_abort",
      "so far",
      ["max_parse_errors"],
    ],
  ];
  for (const [what, ending, event, response, warnings] of committed) {
    test(`${what}: ${event}, then committed with "${response}"`, async () => {
      const t = await turnAt();
      using _ = t.dir;
      const result = await endTurn(t.ctx, ending);
      expect(t.events.map((e) => e.event)).toEqual([event]);
      expect(result).toMatchObject({ response, session_id: "s", trace_id: "t1" });
      expect(result.warnings.map((w) => w.code)).toEqual(warnings as never);
      expect(t.history()?.at(-1)).toEqual({ role: "assistant", content: response });
      expect(t.hasCheckpoint()).toBe(false);
    });
  }

  test("a cancel that won the finish: loop_abort cancelled and no final, nothing committed", async () => {
    const t = await turnAt({ settles: false, aborted: true });
    using _ = t.dir;
    const err = await thrown(() =>
      endTurn(t.ctx, { kind: "answered", step: 2, response: "x", cappedAt: undefined, reasoning: "" }),
    );
    expect(err).toMatchObject({ code: "cancelled" });
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 2, reason: "cancelled" } }]);
    expect(t.history()).toBeUndefined();
    expect(t.hasCheckpoint()).toBe(true);
  });

  test("context_overflow: loop_abort, invalid_request with the counts, the session as it was", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const err = await thrown(() =>
      endTurn(t.ctx, { kind: "context_overflow", step: 0, promptTokens: 700, slot: 512 }),
    );
    expect(err).toMatchObject({
      code: "invalid_request",
      data: { reason: "context_overflow", n_prompt_tokens: 700, n_ctx: 512, trace_id: "t1" },
    });
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 0, reason: "context_overflow" } }]);
    expect(t.history()).toBeUndefined();
    expect(t.hasCheckpoint()).toBe(false); // there was none before the turn
  });

  test("llm_error: loop_abort, internal_error naming what llama-server did, the checkpoint kept", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const failure = new LlmError("server_error", "llama-server answered HTTP 500: boom", { status: 500 });
    const err = await thrown(() => endTurn(t.ctx, { kind: "llm_error", step: 1, failure }));
    expect(err).toMatchObject({
      code: "internal_error",
      data: { reason: "server_error", trace_id: "t1", status: 500 },
    });
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 1, reason: "llm_error" } }]);
    expect(t.hasCheckpoint()).toBe(true);
  });

  test("llm_error of a dead or wedged server: its own code, reason server_failed", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const failure = new CoreError("internal_error", "llama-server stopped responding");
    const err = await thrown(() => endTurn(t.ctx, { kind: "llm_error", step: 1, failure }));
    expect(err).toMatchObject({ code: "internal_error", data: { reason: "server_failed", trace_id: "t1" } });
  });

  test("cancelled: loop_abort at the step being worked on, the abort reason thrown, the checkpoint kept", async () => {
    const t = await turnAt({ aborted: true });
    using _ = t.dir;
    const err = await thrown(() => endTurn(t.ctx, { kind: "cancelled" }));
    expect(err).toMatchObject({ code: "cancelled" });
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 2, reason: "cancelled" } }]);
    expect(t.hasCheckpoint()).toBe(true);
  });

  test("failed: no terminal event, the error as it came, the checkpoint kept", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const error = new CoreError("model_missing", "no model");
    expect(await thrown(() => endTurn(t.ctx, { kind: "failed", error }))).toBe(error);
    expect(t.events).toEqual([]);
    expect(t.hasCheckpoint()).toBe(true);
  });

  test("reasoning only, at the reply cap: reasoning_only (not empty_reply) naming the cap, the thinking stored", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const result = await endTurn(t.ctx, {
      kind: "answered",
      step: 2,
      response: "",
      cappedAt: 64,
      reasoning: "Let me think.",
    });
    expect(result).toMatchObject({ response: "", reasoning: "Let me think." });
    expect(result.warnings.map((w) => w.code)).toEqual(["reasoning_only", "reply_truncated"]);
    expect(result.warnings[0]?.message).toContain("reply limit of 64 tokens");
    expect(result.warnings[0]?.message).toContain("think: false");
    // Stored apart from the content; the model's history leaves it out.
    expect(t.history()?.at(-1)).toEqual({ role: "assistant", content: "" });
    const stored = t.ctx.session;
    expect(stored.state.turn.at(-1)).toMatchObject({ reasoning_content: "Let me think." });
  });

  // A template that ignores enable_thinking (DeepSeek-R1, gpt-oss): the host had turned thinking
  // off and was told to turn it off; what is left to change is the budget or the limit.
  test("reasoning only with think false: the advice says think: false did not stop it, never to set it", async () => {
    const t = await turnAt();
    using _ = t.dir;
    t.ctx.params.think = false;
    for (const ending of [
      { kind: "answered", step: 2, response: "", reasoning: "hmm" },
      { kind: "answered", step: 2, response: "", cappedAt: 64, reasoning: "hmm" },
      { kind: "context_full", step: 2, response: "", contextSize: 512, reasoning: "hmm" },
    ] as TurnEnding[]) {
      t.ctx.warnings.splice(0);
      const result = await endTurn(t.ctx, ending);
      const advice = result.warnings.find((w) => w.code === "reasoning_only")?.message ?? "";
      expect(advice).not.toContain("turn thinking off with think: false");
      expect(advice).toContain("think: false did not stop");
    }
  });

  test("reasoning only until the slot filled: context_full and reasoning_only naming the context", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const result = await endTurn(t.ctx, {
      kind: "context_full",
      step: 2,
      response: "",
      contextSize: 512,
      reasoning: "hmm",
    });
    expect(result.warnings.map((w) => w.code)).toEqual(["context_full", "reasoning_only"]);
    expect(result.warnings[1]?.message).toContain("context (512 tokens)");
  });

  test("output_invalid: loop_abort output_invalid, the text, errors and finish reason, the checkpoint kept", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const errors = [{ path: "", message: "not valid JSON (Unexpected end of JSON input)" }];
    const err = await thrown(() =>
      endTurn(t.ctx, {
        kind: "output_invalid",
        step: 2,
        text: '{"name',
        errors,
        finishReason: "length",
        reasoning: "",
      }),
    );
    expect(err).toMatchObject({
      code: "output_invalid",
      data: { text: '{"name', errors, errors_total: 1, finish_reason: "length", trace_id: "t1" },
    });
    expect((err as Error).message).toContain("cut off by a limit");
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 2, reason: "output_invalid" } }]);
    expect(t.history()).toBeUndefined();
    expect(t.hasCheckpoint()).toBe(true);
  });

  test("output_invalid lists the first 20 of an answer's errors, paths cut, and counts them all", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const errors = Array.from({ length: 5000 }, (_, i) => ({
      path: `/${"k".repeat(i === 0 ? 10_000 : 3)}${i}`,
      message: "must be number",
    }));
    const err = (await thrown(() =>
      endTurn(t.ctx, {
        kind: "output_invalid",
        step: 1,
        text: "[]",
        errors,
        finishReason: "stop",
        reasoning: "",
      }),
    )) as CoreError;
    const data = err.data as { errors: { path: string; message: string }[]; errors_total: number };
    expect(data.errors_total).toBe(5000);
    expect(data.errors).toHaveLength(20);
    expect(data.errors[0]?.path).toHaveLength(201);
    expect(data.errors[1]).toEqual({ path: "/kkk1", message: "must be number" });
    expect(JSON.stringify(err.data).length).toBeLessThan(2000);
    // The message quotes the first error's path: cut too, not the 10 000 characters of the key.
    expect(err.message.length).toBeLessThan(400);
  });

  test("format_refused before the turn did anything: invalid_request naming response_format, the session as it was", async () => {
    const t = await turnAt();
    using _ = t.dir;
    const error = new CoreError("invalid_request", "params.response_format: no", {
      field: "response_format",
    });
    expect(await thrown(() => endTurn(t.ctx, { kind: "refused", step: 0, error }))).toBe(error);
    expect(t.events).toEqual([{ event: "loop_abort", fields: { step: 0, reason: "llm_error" } }]);
    expect(t.hasCheckpoint()).toBe(false);
  });
});
