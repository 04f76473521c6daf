import { z } from "zod";
import { defineMethod } from "./definition.ts";

// Required when the schema is asked for, not on load: the first request does not build
// every result schema (cold start, docs/performance.md).
const results = () => require("../protocol/results.ts") as typeof import("../protocol/results.ts");

export const ping = defineMethod({
  name: "ping",
  params: z.object({}).loose(),
  result: () => results().StatusResultSchema,
  run: () => ({ status: "ok" as const }),
});
