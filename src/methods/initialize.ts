import { z } from "zod";
// The client keeps the zod-free list, checked at compile time against the protocol schemas.
import { CHAT_EVENT_NAMES } from "../client/chat-events.ts";
import { CoreError } from "../protocol/errors.ts";
import { PROTOCOL_VERSIONS } from "../protocol/messages.ts";
import { NAME, VERSION } from "../version.ts";
import { defineMethod } from "./types.ts";

export const InitializeParamsSchema = z.object({
  protocol_versions: z.array(z.number().int().positive()).min(1).default([1]),
  client: z.object({ name: z.string().optional(), version: z.string().optional() }).loose().optional(),
});

export const initialize = defineMethod({
  name: "initialize",
  params: InitializeParamsSchema,
  run: (params, ctx) => {
    const common = params.protocol_versions.filter((v) =>
      (PROTOCOL_VERSIONS as readonly number[]).includes(v),
    );
    if (common.length === 0) {
      throw new CoreError(
        "invalid_request",
        `no common protocol version: the host offered [${params.protocol_versions.join(", ")}], this core supports [${PROTOCOL_VERSIONS.join(", ")}]`,
        { field: "protocol_versions", supported: [...PROTOCOL_VERSIONS] },
      );
    }
    const max = ctx.core.parallelChats();
    return {
      protocol_version: Math.max(...common),
      server: { name: NAME, version: VERSION },
      capabilities: {
        parallel_chat: { supported: max > 1, max_concurrent: max },
        cancel: { targeted: true },
        methods: ctx.methodNames(),
        events: [...CHAT_EVENT_NAMES, "warmup_progress"],
      },
    };
  },
});
