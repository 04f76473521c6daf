import { planReportWithHub } from "../models/plan-with-hub.ts";
import { PlanParamsSchema, PlanReportSchema } from "../protocol/plan.ts";
import { defineMethod } from "./definition.ts";

export const plan = defineMethod({
  name: "plan",
  params: PlanParamsSchema,
  result: () => PlanReportSchema,
  run: async (params, _ctx, services) => planReportWithHub(services, { model: params.model }),
});
