import { z } from "zod";
import { LoopAbortReasonSchema } from "../protocol/chat.ts";
import { CoreError } from "../protocol/errors.ts";
import { defineMethod } from "./definition.ts";

/**
 * Methods that exist only when LOCAL_AI_TEST_METHODS=1, so the protocol plumbing (cancel,
 * the writer's drop policy, internal errors) can be proven before any chat exists. Never
 * listed in initialize otherwise, and not part of the protocol's schema.
 */
export const sleep = defineMethod({
  name: "test.sleep",
  cancellable: true,
  params: z.object({
    ms: z.number().int().nonnegative().max(600_000),
    tick_ms: z.number().int().positive().default(50),
  }),
  result: () => z.object({ slept_ms: z.number() }),
  events: () => ({
    tick: z.object({ n: z.number() }),
    loop_abort: z.object({ step: z.number(), reason: LoopAbortReasonSchema }),
  }),
  run: (params, ctx) =>
    new Promise((resolve, reject) => {
      if (ctx.signal.aborted) {
        ctx.emit("loop_abort", { step: 0, reason: "cancelled" });
        reject(ctx.signal.reason);
        return;
      }
      const started = Date.now();
      let ticks = 0;
      const timer = setInterval(() => ctx.emit("tick", { n: ticks++ }), params.tick_ms);
      const done = setTimeout(() => {
        clearInterval(timer);
        resolve({ slept_ms: Date.now() - started });
      }, params.ms);
      ctx.signal.addEventListener(
        "abort",
        () => {
          clearInterval(timer);
          clearTimeout(done);
          ctx.emit("loop_abort", { step: 0, reason: "cancelled" });
          reject(ctx.signal.reason);
        },
        { once: true },
      );
    }),
});

export const flood = defineMethod({
  name: "test.flood",
  params: z.object({
    count: z.number().int().nonnegative().max(10_000_000),
    size: z.number().int().nonnegative().default(16),
  }),
  result: () => z.object({ emitted: z.number(), dropped_events: z.number() }),
  events: () => ({ llm_chunk: z.object({ step: z.number(), delta: z.string(), n: z.number() }) }),
  run: async (params, ctx) => {
    const delta = "x".repeat(params.size);
    for (let i = 0; i < params.count; i++) ctx.emit("llm_chunk", { step: 0, delta, n: i });
    return { emitted: params.count, dropped_events: ctx.droppedEvents };
  },
});

export const fail = defineMethod({
  name: "test.fail",
  params: z.object({
    kind: z.enum(["unexpected", "core", "stray_rejection", "stray_throw", "opaque"]).default("unexpected"),
  }),
  result: () => z.never(),
  run: async (params) => {
    // A fault no code hears, beside this request's own error (server/stdio-server.ts onFault).
    if (params.kind === "stray_rejection") void Promise.reject(new Error("a stray rejection"));
    if (params.kind === "stray_throw")
      setTimeout(() => {
        throw new Error("a stray throw");
      }, 0);
    // A value with no string form (String() throws on it): still answered internal_error.
    if (params.kind === "opaque") throw Object.create(null);
    if (params.kind === "core")
      throw new CoreError("model_plan_error", "a planned failure", { needed: 2, available: 1 });
    throw new Error("secret internal detail that must not reach stdout");
  },
});
