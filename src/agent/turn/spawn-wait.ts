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
 * Each start's one bounded wait: the chat method waits for its start, then the turn for the same
 * one (run-turn.ts `begunStart`); a start not spawned by then held run_start twice SPAWN_WAIT_MS.
 */
const waits = new WeakMap<StartTicket, Promise<unknown>>();

/**
 * Waits until the start has spawned llama-server, SPAWN_WAIT_MS from the first wait for it at
 * most, or `signal` aborts (a cancel is answered at once, the start going on without the chat).
 * Never rejects.
 */
export async function spawnedWithin(ticket: StartTicket, signal?: AbortSignal): Promise<void> {
  let wait = waits.get(ticket);
  if (!wait) {
    wait = within(
      ticket.spawned.catch(() => {}),
      SPAWN_WAIT_MS,
      undefined,
    );
    waits.set(ticket, wait);
  }
  await (signal ? abortable(wait, signal) : wait).catch(() => {});
}
