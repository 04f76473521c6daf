import { EVENT_NAMES, PROTOCOL_VERSIONS } from "../protocol/capabilities.ts";
import { CoreError } from "../protocol/errors.ts";
import { InitializeParamsSchema, initializeResultSchema } from "../protocol/initialize.ts";
import { NAME, VERSION } from "../version.ts";
import { defineMethod } from "./definition.ts";
import type { Services } from "./services.ts";

export const initialize = defineMethod({
  name: "initialize",
  params: InitializeParamsSchema,
  result: initializeResultSchema,
  run: (params, ctx, services) => {
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
    const max = services.parallelChats();
    // A host initializes at start-up and chats later: the wait in between prepares the chat.
    services.prepareForChat();
    return {
      protocol_version: Math.max(...common),
      server: { name: NAME, version: VERSION },
      capabilities: {
        parallel_chat: { supported: max > 1, max_concurrent: max },
        cancel: { targeted: true },
        // True when the config has `models` entries (docs/models.md, "Several models").
        models: { multiple: servesSeveral(services) },
        methods: ctx.methodNames(),
        events: [...EVENT_NAMES],
      },
    };
  },
});

/**
 * Whether several models are served: a core that wires them, with `models` entries in its config
 * (read here; a missing or broken one: no).
 */
function servesSeveral(services: Services): boolean {
  try {
    return services.models !== undefined && services.config().models.length > 0;
  } catch {
    return false;
  }
}
