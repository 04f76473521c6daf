import { z } from "zod";
import { buildPlanReport } from "../plan/report.ts";
import { defineMethod } from "./definition.ts";

/**
 * The plan result's schema, and the one place to swap in the planner's strict report schema:
 * once src/plan/report-schema.ts exports `PlanReportSchema`, this line becomes
 * `export const PlanResultSchema = PlanReportSchema;` (imported from there); then regenerate
 * docs/protocol.schema.json (`bun scripts/schema.ts`) and src/client/protocol-types.ts
 * (`bun scripts/build-client.ts`). Until then the result is an open object.
 */
export const PlanResultSchema = z.object({}).loose();
export type PlanResult = z.infer<typeof PlanResultSchema>;

export const plan = defineMethod({
  name: "plan",
  params: z.object({}).loose(),
  result: () => PlanResultSchema,
  run: async (_params, _ctx, services) => buildPlanReport(services.config()),
});
