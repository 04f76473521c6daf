import { z } from "zod";
import { planReportWithHub } from "../models/remote-header.ts";
import { PlanReportSchema } from "../plan/report-schema.ts";
import { defineMethod } from "./definition.ts";

/** The plan result: the planner's strict report schema (the JSON Schema and client types read it). */
export const PlanResultSchema = PlanReportSchema;
export type PlanResult = z.infer<typeof PlanResultSchema>;

export const plan = defineMethod({
  name: "plan",
  params: z
    .object({
      /**
       * Judge this model instead of model.path: a GGUF path (relative to the config's folder) or
       * `hf:org/name[:QUANT|:file.gguf]`, read from the hub's header when not in the cache.
       */
      model: z.string().min(1).optional(),
    })
    .loose(),
  result: () => PlanResultSchema,
  run: async (params, _ctx, services) => planReportWithHub(services, { model: params.model }),
});
