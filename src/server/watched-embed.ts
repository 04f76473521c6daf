import { requestDeadlineMs } from "../llama/embed-budget.ts";
import { type Embedded, embed, type RequestWork } from "../llama/embeddings.ts";
import type { LlamaLease } from "../runtime/endpoint.ts";
import { retryOrThrow } from "../runtime/lease-failure.ts";
import { watchDeadline } from "../runtime/watchdog.ts";

/** A request's deadline from its estimated tokens and llama.request_timeout_s in ms (tests: a short one). */
export type EmbedDeadline = (tokens: number, floorMs: number) => number;

/**
 * The estimated tokens of the embedding requests in flight on each server. llama-server queues a
 * request's inputs behind those of the requests before it (one task each, its slots shared), so
 * a request's deadline counts the work ahead of it too: counted alone, the fourth of four full
 * requests on a slow CPU would be called a wedge while honest, and the restart would end all four.
 */
const queued = new WeakMap<object, { tokens: number }>();

/** A request's watch, its deadline over its own tokens and those in flight before it on the server. */
function queuedWatch(
  lease: LlamaLease,
  signal: AbortSignal,
  work: RequestWork,
  deadline: EmbedDeadline,
): { signal: AbortSignal; dispose(): void } {
  const server = lease.launch;
  const queue = queued.get(server) ?? { tokens: 0 };
  queued.set(server, queue);
  const tokens = queue.tokens + work.tokens;
  queue.tokens = tokens;
  const ahead = tokens > work.tokens ? `, behind ${tokens - work.tokens} in flight` : "";
  const what = `an embedding request of ${work.inputs} input${work.inputs === 1 ? "" : "s"} (about ${work.tokens} tokens at most${ahead})`;
  const watch = watchDeadline(lease, signal, deadline(tokens, lease.requestTimeoutMs), what);
  let disposed = false;
  return {
    signal: watch.signal,
    dispose: () => {
      if (disposed) return;
      disposed = true;
      queue.tokens -= work.tokens;
      watch.dispose();
    },
  };
}

/**
 * Embeds on a lease as a chat completes on one (agent/watched-completion.ts): each request under
 * a deadline that grows with its estimated tokens and those of the requests ahead of it on the
 * server, never under llama.request_timeout_s (llama/embed-budget.ts); past it the request is
 * aborted and the server reported wedged, so the supervisor restarts it. A lost connection or a
 * server error is reported too, a lost one named by the server's death where that is heard; a
 * refused input or an unusable answer says nothing about the server. A connection refused reached
 * no server (it died before its exit was seen): once the lease has moved to the restarted one, the
 * embedding is asked again, once, as a chat's request is sent again. Errors are thrown as they came.
 */
export async function watchedEmbed(
  lease: LlamaLease,
  input: readonly string[],
  signal: AbortSignal,
  deadline: EmbedDeadline = requestDeadlineMs,
): Promise<Embedded> {
  for (let again = false; ; again = true) {
    try {
      // Read once per launch, as the server turned ready (launch.ts): no input has more tokens.
      const context = await lease.launch.contextSize(signal);
      const out = await embed(lease, input, {
        signal,
        ...(context === undefined ? {} : { maxInputTokens: context }),
        watch: (work) => queuedWatch(lease, signal, work, deadline),
      });
      lease.launch.taskServed();
      return out;
    } catch (err) {
      await retryOrThrow(lease, err, signal, again);
    }
  }
}
