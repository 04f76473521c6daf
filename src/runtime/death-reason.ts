import { IDENTIFY_TIMEOUT_MS } from "./rpc-watch.ts";

/**
 * How long a lost connection waits for llama-server's death to be heard. A server that dies (an
 * abort, an RPC worker gone, the OOM killer) closes its sockets as it exits, and the reset can
 * reach a request a few ms before the exit does: the crash error names the cause (the lost worker,
 * the exit code, the log tail) where the socket says only "reset", and whoever holds the lease
 * can tell a dead server from a dropped connection. Paid only on a lost connection.
 */
export const DEATH_GRACE_MS = 500;

/**
 * The wait for `launch`: with RPC workers its death is heard only once the lost worker has been
 * looked for (RpcWatch.named, up to IDENTIFY_TIMEOUT_MS), so every waiter allows for that.
 */
export function deathGraceMs(launch: { readonly rpcWorkers: readonly string[] }): number {
  return DEATH_GRACE_MS + (launch.rpcWorkers.length > 0 ? IDENTIFY_TIMEOUT_MS : 0);
}

/** `died`'s reason once it aborts within `ms`; undefined when it does not, or on cancel. */
export async function deathReason(died: AbortSignal, cancel: AbortSignal, ms: number): Promise<unknown> {
  if (!died.aborted && !cancel.aborted) {
    const stop = AbortSignal.any([died, cancel, AbortSignal.timeout(ms)]);
    await new Promise((resolve) => stop.addEventListener("abort", resolve, { once: true }));
  }
  return died.aborted && !cancel.aborted ? died.reason : undefined;
}
