import type { StartTicket } from "../../runtime/endpoint.ts";
import { abortable } from "../../util/abortable.ts";
import { within } from "../../util/within.ts";

/**
 * Longest a turn waits for the spawn before going on (a slow GPU probe, or a wait for memory,
 * must not hold run_start). Long enough to cover a swap's eviction (a plan, a KV save, a stop:
 * 30–60 ms here): the turn's own preparation, ~10 ms on the one thread, then runs while the new
 * server loads instead of delaying the old one's stop (docs/performance.md "Several models").
 */
export const SPAWN_WAIT_MS = 250;

/**
 * Waits until the start has spawned llama-server, SPAWN_WAIT_MS at most, or `signal` aborts (a
 * cancel is answered at once, the start going on without the chat). Never rejects.
 */
export async function spawnedWithin(ticket: StartTicket, signal?: AbortSignal): Promise<void> {
  const spawned = signal ? abortable(ticket.spawned, signal) : ticket.spawned;
  await within(
    spawned.catch(() => {}),
    SPAWN_WAIT_MS,
    undefined,
  );
}
