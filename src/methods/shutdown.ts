import { z } from "zod";
import { defineMethod } from "./types.ts";

export const shutdown = defineMethod({
  name: "shutdown",
  params: z.object({}).loose(),
  // In-flight requests are cancelled and the supervisor stopped before this answers.
  run: async (_params, ctx) => {
    await ctx.shutdown();
    return { status: "ok" };
  },
});
