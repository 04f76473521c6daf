import { MAX_TIMER_MS } from "./timer-limit.ts";

/**
 * The delay before restart number `attempt` (1-based): `initialMs` doubled per attempt, capped
 * at `maxMs`, and at what a timer can hold (a host's `maxDelayMs: Infinity` restarted at once).
 * Shared by the supervisor (llama-server) and the host client (the core itself), so both back off
 * the same way. Plain TypeScript: the client bundle must not need Bun.
 */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(initialMs * 2 ** Math.max(0, attempt - 1), maxMs, MAX_TIMER_MS);
}
