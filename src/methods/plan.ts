import { z } from "zod";
import { buildPlanReport } from "../plan/report.ts";
import { defineMethod } from "./types.ts";

export const plan = defineMethod({
  name: "plan",
  params: z.object({}).loose(),
  run: async (_params, ctx) => buildPlanReport(ctx.core),
});
