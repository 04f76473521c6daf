import { CoreError } from "../protocol/errors.ts";
import type { LlamaLease } from "./endpoint.ts";
import { frozenWorkerNote } from "./rpc-watch.ts";

/**
 * For a request on a lease: a signal that aborts when the chat is cancelled, when the server
 * dies, or when no progress was seen for lease.requestTimeoutMs (a wedged server that still
 * answers /health). A wedge is reported to the supervisor, which restarts the server.
 * Call `touch()` on progress (llama/completion.ts onProgress: any read before the first
 * token, pings included; after it a read that dispatched an SSE event) and `dispose()` when done.
 */
export function watchProgress(
  lease: LlamaLease,
  cancel: AbortSignal,
): {
  signal: AbortSignal;
  touch(): void;
  dispose(): void;
} {
  const wedge = new AbortController();
  const limit = lease.requestTimeoutMs;
  // Progress is a timestamp, not a timer reset per read: a long reply touches this thousands of
  // times, and clearTimeout + setTimeout per token was measurable CPU (docs/performance.md,
  // "Where a streamed piece's CPU goes"). The one timer, when it fires, re-arms for the rest.
  let last = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const idle = performance.now() - last;
    if (idle < limit) {
      timer = setTimeout(check, limit - idle);
      return;
    }
    timer = undefined;
    const reason = `no progress for ${Math.round(limit / 1000)} s (llama.request_timeout_s)`;
    const note = frozenWorkerNote(lease.launch.rpcWorkers);
    wedge.abort(new CoreError("internal_error", `llama-server stopped responding: ${reason}${note}`));
    lease.reportFailure(reason);
  };
  timer = setTimeout(check, limit);
  return {
    signal: AbortSignal.any([cancel, lease.died, wedge.signal]),
    touch: () => {
      last = performance.now();
    },
    dispose: () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
