/**
 * The longest delay setTimeout honours (2^31 - 1 ms, about 24.8 days); Node and Bun fire a
 * longer one at once (after 1 ms). Plain TypeScript: the client bundle uses it too.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a timer can hold it: a host's huge grace (or Infinity) is the longest wait, never none. */
export function timerMs(ms: number): number {
  return Math.min(ms, MAX_TIMER_MS);
}
