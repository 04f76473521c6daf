import { z } from "zod";
import { once } from "../util/once.ts";

/** `initialize`: the handshake; the versions and event names it announces are in capabilities.ts. */
export const InitializeParamsSchema = z.object({
  protocol_versions: z.array(z.number().int().positive()).min(1).default([1]),
  client: z.object({ name: z.string().optional(), version: z.string().optional() }).loose().optional(),
});

/**
 * Built on first ask (the schema export, tests), never to answer: the first request of every
 * host builds no result schema (cold start). Loose: a host may rely on the named fields, and
 * extra fields pass through.
 */
export const initializeResultSchema = once(() =>
  z
    .object({
      protocol_version: z.number().int().positive(),
      server: z.object({ name: z.string(), version: z.string() }).loose(),
      capabilities: z
        .object({
          parallel_chat: z
            .object({ supported: z.boolean(), max_concurrent: z.number().int().positive() })
            .loose(),
          cancel: z.object({ targeted: z.boolean() }).loose(),
          /** Several models at once, chosen per request (docs/models.md, "Several models"). */
          models: z.object({ multiple: z.boolean() }).loose(),
          methods: z.array(z.string()),
          events: z.array(z.string()),
        })
        .loose(),
    })
    .loose(),
);
export type InitializeResult = z.infer<ReturnType<typeof initializeResultSchema>>;
