import { CoreError } from "../protocol/errors.ts";
import { timerMs } from "../util/timer-limit.ts";
import type { LlamaLease } from "./endpoint.ts";
import { frozenWorkerNote } from "./rpc-watch.ts";

/**
 * Before the first token, the most times request_timeout_s a request may go without an SSE event
 * while bytes still come: llama-server's 30 s pings come from its HTTP thread, wedged task loop
 * or not, so they keep a request alive only this long past its last event (a prompt progress
 * event, llama/completion.ts). One batch of the prompt (2048 tokens, llama.cpp's default; the
 * core sets none), or an image's encoding, runs between two events: 20 min at the default 120 s
 * is such a batch at 1.7 tokens a second. As the start-up's 10 × cap (docs/supervisor.md).
 */
export const EVENTLESS_CAP = 10;

/**
 * For a request on a lease: a signal that aborts when the chat is cancelled, when the server
 * dies, or when no progress was seen for lease.requestTimeoutMs (a wedged server that still
 * answers /health). A wedge is reported to the supervisor, which restarts the server.
 * Call `touch()` for a read that dispatched an SSE event, `alive()` for one that did not before
 * the first token (pings: alive, but no event for EVENTLESS_CAP × the limit is a wedge too;
 * llama/completion.ts onProgress, onAlive), and `dispose()` when done.
 */
export function watchProgress(
  lease: LlamaLease,
  cancel: AbortSignal,
): {
  signal: AbortSignal;
  touch(): void;
  alive(): void;
  dispose(): void;
} {
  const wedge = new AbortController();
  const limit = lease.requestTimeoutMs;
  const cap = EVENTLESS_CAP * limit;
  // Progress is a timestamp, not a timer reset per read: a long reply touches this thousands of
  // times, and clearTimeout + setTimeout per token was measurable CPU (docs/performance.md,
  // "Where a streamed piece's CPU goes"). The one timer, when it fires, re-arms for the rest.
  let lastByte = performance.now();
  let lastEvent = lastByte;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const now = performance.now();
    const quiet = now - lastByte;
    const eventless = now - lastEvent;
    const left = Math.min(limit - quiet, cap - eventless);
    if (left > 0) {
      timer = setTimeout(check, left);
      return;
    }
    timer = undefined;
    const reason =
      quiet >= limit
        ? `no progress for ${Math.round(limit / 1000)} s (llama.request_timeout_s)`
        : `no progress for ${Math.round(cap / 1000)} s, only its keep-alive pings (${EVENTLESS_CAP} × llama.request_timeout_s)`;
    const note = frozenWorkerNote(lease.launch.rpcWorkers);
    wedge.abort(new CoreError("internal_error", `llama-server stopped responding: ${reason}${note}`));
    lease.reportFailure(reason);
  };
  timer = setTimeout(check, limit);
  return {
    signal: AbortSignal.any([cancel, lease.died, wedge.signal]),
    touch: () => {
      lastByte = lastEvent = performance.now();
    },
    alive: () => {
      lastByte = performance.now();
    },
    dispose: () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * For a request whose answer comes whole or not at all (/v1/embeddings: no stream, no progress,
 * no ping, llama/embed-budget.ts): a signal that aborts when `cancel` does, or once `ms` have
 * passed with no answer read, as a wedge: the error the host gets (`internal_error`,
 * `data.reason` `server_failed`, as a chat's wedge) and a failure reported to the supervisor,
 * which restarts the server. `what` names the request's work. `dispose()` once it is read.
 */
export function watchDeadline(
  lease: LlamaLease,
  cancel: AbortSignal,
  ms: number,
  what: string,
): { signal: AbortSignal; dispose(): void } {
  const wedge = new AbortController();
  const timer = setTimeout(() => {
    const reason = `no answer in ${Math.round(ms / 1000)} s to ${what}`;
    const note = frozenWorkerNote(lease.launch.rpcWorkers);
    wedge.abort(
      new CoreError("internal_error", `llama-server stopped responding: ${reason}; it is restarted${note}`, {
        reason: "server_failed",
      }),
    );
    lease.reportFailure(reason);
    // Past 2^31 - 1 ms a timer fires at once: a huge budget would restart a healthy server.
  }, timerMs(ms));
  return { signal: AbortSignal.any([cancel, wedge.signal]), dispose: () => clearTimeout(timer) };
}
