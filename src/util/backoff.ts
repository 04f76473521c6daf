/** The longest delay a timer holds (setTimeout's 32-bit signed ms): a longer one fires at once. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * The delay before restart number `attempt` (1-based): `initialMs` doubled per attempt, capped
 * at `maxMs`, and at what a timer can hold (a host's `maxDelayMs: Infinity` restarted at once).
 * Shared by the supervisor (llama-server) and the host client (the core itself), so both back off
 * the same way. Plain TypeScript: the client bundle must not need Bun.
 */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(initialMs * 2 ** Math.max(0, attempt - 1), maxMs, LONGEST_TIMER_MS);
}
