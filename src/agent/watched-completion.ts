import { type CompletionRequest, type StreamOptions, streamCompletion } from "../llama/completion.ts";
import type { CompletionResult } from "../llama/stream-reply.ts";
import type { LlamaLease } from "../runtime/endpoint.ts";
import { retryOrThrow } from "../runtime/lease-failure.ts";
import { watchProgress } from "../runtime/watchdog.ts";

/**
 * As streamCompletion's, less the watchdog's progress: `signal` is the chat's cancel, `onSent`
 * runs again when the request is resent, and an event of reasoning is progress like one of content.
 */
export type WatchedOptions = Omit<StreamOptions, "onProgress" | "onAlive">;

/**
 * One completion on a lease, with the server's health judged here and in the watchdog, never by
 * the turn: the request aborts on cancel, on the server's death, or when no progress arrives for
 * request_timeout_s (an SSE event: a token, or a batch of the prompt read; before the first token
 * a ping too, but for at most EVENTLESS_CAP × request_timeout_s after the last event; the watchdog
 * reports the wedge); a connection lost or a server error is reported here, so the supervisor restarts the
 * server on the next chat, a lost one after a short wait for the server's death to be heard (it
 * names why better: runtime/death-reason.ts; with RPC workers, plus the time finding the lost one
 * may take: rpc-watch.ts). A connection refused is a server that died before its exit was seen: it
 * reached no server, so once the lease has moved to the restarted one (within the restart budget)
 * it is sent again, once. A reply that is garbage, or a prompt that does not fit, says nothing
 * about the server and is not reported. Errors are thrown as they came; what they mean for the
 * turn is the turn's to decide.
 */
export async function watchedCompletion(
  lease: LlamaLease,
  request: CompletionRequest,
  options: WatchedOptions,
): Promise<CompletionResult> {
  const cancel = options.signal;
  for (let resent = false; ; resent = true) {
    const watch = watchProgress(lease, cancel);
    try {
      const result = await streamCompletion(lease, request, {
        ...options,
        signal: watch.signal,
        onProgress: watch.touch,
        onAlive: watch.alive,
      });
      lease.launch.taskServed();
      return result;
    } catch (err) {
      // Sent again once the lease moved to the restarted server; else thrown, reported or named.
      await retryOrThrow(lease, err, cancel, resent, () => watch.dispose());
    } finally {
      watch.dispose();
    }
  }
}
