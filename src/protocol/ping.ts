import { z } from "zod";
import { once } from "../util/once.ts";

/**
 * `ping`: no params. Any sent are dropped unread, not kept for the lone-surrogate check: a ping
 * answers whatever its params hold (docs/protocol.md "Methods").
 */
export const PingParamsSchema = z.object({});

/**
 * `{status: "ok"}`: ping's answer, and shutdown's. Built on first ask (the schema export,
 * tests), never to answer a ping (cold start, pings/s).
 */
export const okResultSchema = once(() => z.object({ status: z.literal("ok") }).loose());
export type StatusResult = z.infer<ReturnType<typeof okResultSchema>>;
