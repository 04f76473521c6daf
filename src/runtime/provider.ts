import { CoreError } from "../protocol/errors.ts";
import type { Core } from "../server/core.ts";
import type { LlamaProvider } from "./endpoint.ts";

/**
 * Placeholder until the supervisor lands: the real one returns the core's llama-server
 * supervisor (a Core service). Chat fails cleanly instead of crashing meanwhile.
 */
export function llamaProvider(_core: Core): LlamaProvider {
  throw new CoreError("internal_error", "llama-server supervisor not available yet");
}
