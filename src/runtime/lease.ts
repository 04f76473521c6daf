import type { LlamaLease } from "./endpoint.ts";
import type { StartProgress } from "./start-progress.ts";
import type { Running } from "./supervisor-state.ts";

/** What a lease asks of the supervisor that handed it out. */
export interface LeaseOwner {
  requestTimeoutMs: number;
  reportFailure(running: Running, reason: string): void;
  /** A server that serves in place of `old`, which refused a request or died (restarted within the budget). */
  successor(old: Running, signal: AbortSignal, onProgress?: (p: StartProgress) => void): Promise<Running>;
}

/**
 * A lease on a slot of `running`. Its endpoint follows the server it is on: `reconnect` moves
 * it to the successor of a server that refused its request or died, admitted onto its slots there.
 */
export function leaseOn(running: Running, owner: LeaseOwner): LlamaLease {
  let released = false;
  let on = running;
  return {
    get baseUrl() {
      return on.launch.baseUrl;
    },
    get apiKey() {
      return on.launch.apiKey;
    },
    get died() {
      return on.launch.died;
    },
    get launch() {
      return on.launch;
    },
    requestTimeoutMs: owner.requestTimeoutMs,
    release: () => {
      if (released) return;
      released = true;
      on.launch.leave();
    },
    reportFailure: (reason: string) => owner.reportFailure(on, reason),
    reconnect: async (signal: AbortSignal, onProgress?: (p: StartProgress) => void) => {
      if (released) throw new Error("reconnect on a released lease");
      const old = on;
      const next = await owner.successor(old, signal, onProgress);
      old.launch.leave();
      on = next;
    },
  };
}
