import { okResultSchema } from "../protocol/ping.ts";
import { ShutdownParamsSchema } from "../protocol/shutdown.ts";
import { defineMethod } from "./definition.ts";

export const shutdown = defineMethod({
  name: "shutdown",
  params: ShutdownParamsSchema,
  result: okResultSchema,
  // In-flight requests are cancelled and the supervisor stopped before this answers.
  run: async (_params, ctx) => {
    await ctx.shutdown();
    return { status: "ok" as const };
  },
});
