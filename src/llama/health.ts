import { statusOf, type Target } from "./http.ts";

/**
 * Readiness (recordings 01, 02, 76): the port is bound before the model loads and every route
 * answers 503 "Loading model" until it has; `/health` turns 200 then. It is public, so it
 * cannot tell our child from another program on the port: `/v1/models` is behind the key.
 */

/** GET /health: its status, or null when nothing answers (the port is not open yet). */
export function healthStatus(baseUrl: string, timeoutMs: number): Promise<number | null> {
  return statusOf({ baseUrl }, "/health", { timeoutMs });
}

/**
 * GET /v1/models with `server.apiKey`, or with no key when it has none: 401 from a server that
 * wants another key (or any), 200 when the key is right; null when nothing answers.
 */
export function modelsStatus(server: Target, timeoutMs: number): Promise<number | null> {
  return statusOf(server, "/v1/models", { timeoutMs });
}
