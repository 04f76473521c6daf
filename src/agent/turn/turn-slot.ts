import type { LlamaLease } from "../../runtime/endpoint.ts";
import type { StartProgress } from "../../runtime/start-progress.ts";
import type { PromptReuse, ReusedTurn } from "../kv/reuse.ts";
import type { SessionKey } from "../kv/session-key.ts";

/**
 * A turn's slot and its session's prompt record, on the lease's server (docs/agent.md#prompt-reuse).
 * A server that died before the turn's first request (a KV restore that killed it: transcripts/93f;
 * restore-state.ts dropped the file) voids what was picked there; the turn has sent nothing, so
 * rather than fail on a dead server it waits for the restart, within the restart budget and with
 * progress as for any start, and takes a slot there: a fresh launch holds no state and the file is
 * gone, so its prompt is processed from scratch. Once: a second death is its request's to meet. A
 * restart that fails fails the turn as a failed start does.
 */
export async function turnSlot(
  reuse: PromptReuse | undefined,
  lease: LlamaLease,
  key: SessionKey,
  signal: AbortSignal,
  onProgress: (p: StartProgress) => void,
): Promise<ReusedTurn | undefined> {
  const reused = await reuse?.begin(lease, key, signal);
  if (!reused || !lease.died.aborted || !lease.reconnect) return reused;
  reused.abandon();
  await lease.reconnect(signal, onProgress);
  return reuse?.begin(lease, key, signal);
}
