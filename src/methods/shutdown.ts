import { z } from "zod";
import { StatusResultSchema } from "../protocol/results.ts";
import { defineMethod } from "./definition.ts";

export const shutdown = defineMethod({
  name: "shutdown",
  params: z.object({}).loose(),
  result: () => StatusResultSchema,
  // In-flight requests are cancelled and the supervisor stopped before this answers.
  run: async (_params, ctx) => {
    await ctx.shutdown();
    return { status: "ok" as const };
  },
});
