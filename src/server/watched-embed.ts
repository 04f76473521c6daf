import { requestDeadlineMs } from "../llama/embed-budget.ts";
import { type Embedded, embed } from "../llama/embeddings.ts";
import { LlmError } from "../llama/errors.ts";
import type { LlamaLease } from "../runtime/endpoint.ts";
import { watchDeadline } from "../runtime/watchdog.ts";

/** A request's deadline from its estimated tokens and llama.request_timeout_s in ms (tests: a short one). */
export type EmbedDeadline = (tokens: number, floorMs: number) => number;

/**
 * Embeds on a lease as a chat completes on one (agent/watched-completion.ts): each request under
 * a deadline that grows with its estimated tokens and is never under llama.request_timeout_s
 * (llama/embed-budget.ts); past it the request is aborted and the server reported wedged, so the
 * supervisor restarts it. A lost connection or a server error is reported too; a refused input
 * or an unusable answer says nothing about the server. Errors are thrown as they came.
 */
export async function watchedEmbed(
  lease: LlamaLease,
  input: readonly string[],
  signal: AbortSignal,
  deadline: EmbedDeadline = requestDeadlineMs,
): Promise<Embedded> {
  // Read once per launch, as the server turned ready (launch.ts): no input has more tokens.
  const context = await lease.launch.contextSize(signal);
  try {
    const out = await embed(lease, input, {
      signal,
      ...(context === undefined ? {} : { maxInputTokens: context }),
      watch: (work) =>
        watchDeadline(
          lease,
          signal,
          deadline(work.tokens, lease.requestTimeoutMs),
          `an embedding request of ${work.inputs} input${work.inputs === 1 ? "" : "s"} (about ${work.tokens} tokens at most)`,
        ),
    });
    lease.launch.taskServed();
    return out;
  } catch (err) {
    if (
      !signal.aborted &&
      err instanceof LlmError &&
      (err.kind === "connection_lost" || err.kind === "server_error")
    )
      lease.reportFailure(err.message);
    throw err;
  }
}
