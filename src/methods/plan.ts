import { planReportWithHub } from "../models/plan-with-hub.ts";
import { PlanParamsSchema, PlanReportSchema } from "../protocol/plan.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";

/**
 * `plan` (docs/protocol.md#plan): the model section's plan, or `model`'s: a configured name is
 * planned as if it were alone, with its own keys (docs/models.md, "Several models"); anything
 * else is a GGUF's path or `hf:` reference. The CLI's `plan --model` reads it the same way.
 */
export const plan = defineMethod({
  name: "plan",
  params: PlanParamsSchema,
  result: () => PlanReportSchema,
  // Not cancellable, but neither a hub read (60 s a request) nor a hung llama-server's probe
  // (5 s) may hold the core's stop: the read is given up, the probe ends with the core.
  run: async (params, ctx, services) =>
    abortable(
      planReportWithHub(services, { model: params.model }, process.env, { signal: ctx.stopping }),
      ctx.stopping,
    ),
});
