import { ConnectionRefused, LlmError } from "../llama/errors.ts";
import { deathGraceMs, deathReason } from "./death-reason.ts";
import type { LlamaLease } from "./endpoint.ts";

/**
 * What a request's failure on a lease says about its server (agent/watched-completion.ts,
 * server/watched-embed.ts). A connection refused the first time reached no server (it died before
 * its exit was seen): the lease moves to the restarted one (`beforeReconnect` first: the request's
 * own watch ends) and this returns, for the request to be sent again there, once. Otherwise it
 * throws: a lost connection as the server's death where that is heard (it names why better:
 * death-reason.ts), else the error, the server reported failed first when the error says it
 * failed (lost, or a server error); a garbage answer or a refused input says nothing about it.
 */
export async function retryOrThrow(
  lease: LlamaLease,
  err: unknown,
  signal: AbortSignal,
  resent: boolean,
  beforeReconnect?: () => void,
): Promise<void> {
  if (signal.aborted) throw err;
  if (err instanceof ConnectionRefused && !resent && lease.reconnect) {
    beforeReconnect?.();
    await lease.reconnect(signal);
    return;
  }
  if (err instanceof LlmError && err.kind === "connection_lost") {
    const why = await deathReason(lease.died, signal, deathGraceMs(lease.launch));
    if (why !== undefined) throw why;
  }
  if (err instanceof LlmError && (err.kind === "connection_lost" || err.kind === "server_error"))
    lease.reportFailure(err.message);
  throw signal.aborted ? signal.reason : err;
}
