import { okResultSchema, PingParamsSchema } from "../protocol/ping.ts";
import { defineMethod } from "./definition.ts";

export const ping = defineMethod({
  name: "ping",
  params: PingParamsSchema,
  result: okResultSchema,
  run: () => ({ status: "ok" as const }),
});
