import { type CompletionRequest, type StreamOptions, streamCompletion } from "../llama/completion.ts";
import { ConnectionRefused, LlmError } from "../llama/errors.ts";
import type { CompletionResult } from "../llama/stream-reply.ts";
import type { LlamaLease } from "../runtime/endpoint.ts";
import { IDENTIFY_TIMEOUT_MS } from "../runtime/rpc-watch.ts";
import { watchProgress } from "../runtime/watchdog.ts";

/**
 * As streamCompletion's, less the watchdog's progress: `signal` is the chat's cancel, `onSent`
 * runs again when the request is resent, and an event of reasoning is progress like one of content.
 */
export type WatchedOptions = Omit<StreamOptions, "onProgress">;

/**
 * One completion on a lease, with the server's health judged here and in the watchdog, never by
 * the turn: the request aborts on cancel, on the server's death, or when no progress arrives for
 * request_timeout_s (a byte before the first token, an SSE event after it; the watchdog reports
 * the wedge); a connection lost or a server error is reported here, so the supervisor restarts the
 * server on the next chat, a lost one after a short wait for the server's death to be heard (it
 * names why better: DEATH_GRACE_MS). A connection refused is a server that died before its exit was seen: it
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
      });
      lease.launch.taskServed();
      return result;
    } catch (err) {
      if (cancel.aborted) throw err;
      if (err instanceof ConnectionRefused && !resent && lease.reconnect) {
        watch.dispose();
        await lease.reconnect(cancel);
        continue;
      }
      if (err instanceof LlmError && err.kind === "connection_lost") {
        // The process's exit (or the RPC watch's line) tells why better than the socket did.
        const grace = DEATH_GRACE_MS + (lease.launch.rpcWorkers.length > 0 ? IDENTIFY_TIMEOUT_MS : 0);
        const why = await deathReason(lease.died, cancel, grace);
        if (why !== undefined) throw why;
      }
      if (err instanceof LlmError && serverFailed(err)) lease.reportFailure(err.message);
      throw cancel.aborted ? cancel.reason : err;
    } finally {
      watch.dispose();
    }
  }
}

/**
 * How long a lost connection waits for the server's death to be heard. A server that aborts (an
 * RPC worker gone, llama.cpp's GGML_ABORT) closes its sockets as it exits, and the reset can reach
 * the request a few ms before the exit does: the crash error names the cause (the lost worker,
 * the exit code, the log tail) where the socket says only "reset". Paid only on a lost connection;
 * with RPC workers, plus the time finding the lost one may take (runtime/rpc-watch.ts).
 */
export const DEATH_GRACE_MS = 500;

/** `died`'s reason once it aborts within `ms`; undefined when it does not, or on cancel. */
async function deathReason(died: AbortSignal, cancel: AbortSignal, ms: number): Promise<unknown> {
  if (!died.aborted && !cancel.aborted) {
    const stop = AbortSignal.any([died, cancel, AbortSignal.timeout(ms)]);
    await new Promise((resolve) => stop.addEventListener("abort", resolve, { once: true }));
  }
  return died.aborted && !cancel.aborted ? died.reason : undefined;
}

function serverFailed(err: LlmError): boolean {
  return err.kind === "connection_lost" || err.kind === "server_error";
}
