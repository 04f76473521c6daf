import { z } from "zod";
import { buildPlanReport } from "../plan/report.ts";
import { PlanReportSchema } from "../plan/report-schema.ts";
import { defineMethod } from "./definition.ts";

/** The plan result: the planner's strict report schema (the JSON Schema and client types read it). */
export const PlanResultSchema = PlanReportSchema;
export type PlanResult = z.infer<typeof PlanResultSchema>;

export const plan = defineMethod({
  name: "plan",
  params: z.object({}).loose(),
  result: () => PlanResultSchema,
  run: async (_params, _ctx, services) => buildPlanReport(services.config()),
});
