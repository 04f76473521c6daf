import { CoreError } from "../protocol/errors.ts";
import type { LlamaLease } from "./endpoint.ts";

/**
 * For a request on a lease: a signal that aborts when the chat is cancelled, when the server
 * dies, or when no progress was seen for lease.requestTimeoutMs (a wedged server that still
 * answers /health). A wedge is reported to the supervisor, which restarts the server.
 * Call `touch()` on every byte/chunk received and `dispose()` when done.
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
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      const seconds = Math.round(lease.requestTimeoutMs / 1000);
      const reason = `no progress for ${seconds} s (llama.request_timeout_s)`;
      wedge.abort(new CoreError("internal_error", `llama-server stopped responding: ${reason}`));
      lease.reportFailure(reason);
    }, lease.requestTimeoutMs);
  };
  arm();
  return {
    signal: AbortSignal.any([cancel, lease.died, wedge.signal]),
    touch: arm,
    dispose: () => {
      if (timer) clearTimeout(timer);
    },
  };
}
