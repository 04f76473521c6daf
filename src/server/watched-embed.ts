import { requestDeadlineMs } from "../llama/embed-budget.ts";
import { EmbedError } from "../llama/embed-error.ts";
import { type Embedded, embed, type RequestWork } from "../llama/embeddings.ts";
import { ConnectionRefused, LlmError } from "../llama/errors.ts";
import { CoreError } from "../protocol/errors.ts";
import type { LlamaLease } from "../runtime/endpoint.ts";
import { retryOrThrow } from "../runtime/lease-failure.ts";
import { watchDeadline } from "../runtime/watchdog.ts";
import { CRASHES_TO_CONVICT, type CrashSuspects } from "./embed-suspects.ts";

/**
 * A request's deadline from the estimated tokens in flight up to it, llama.request_timeout_s in ms
 * and its own estimated tokens (tests: a short one).
 */
export type EmbedDeadline = (tokens: number, floorMs: number, own: number) => number;

/**
 * The estimated tokens of the embedding requests in flight on each server. llama-server queues a
 * request's inputs behind those of the requests before it (one task each, its slots shared), so
 * a request's deadline counts the work ahead of it too: counted alone, the fourth of four full
 * requests on a slow CPU would be called a wedge while honest, and the restart would end all four.
 */
const queued = new WeakMap<object, { tokens: number; live: Set<InFlight> }>();

/**
 * A request in flight: its texts, and whether another request was in flight on its server at
 * any moment of its own (a death then cannot tell whose input it was: embed-suspects.ts).
 */
interface InFlight {
  texts: readonly string[];
  shared: boolean;
}

/** A request's watch, its deadline over its own tokens and those in flight before it on the server. */
function queuedWatch(
  lease: LlamaLease,
  signal: AbortSignal,
  work: RequestWork,
  deadline: EmbedDeadline,
  entry: InFlight,
): { signal: AbortSignal; dispose(): void } {
  const server = lease.launch;
  const queue = queued.get(server) ?? { tokens: 0, live: new Set<InFlight>() };
  queued.set(server, queue);
  const tokens = queue.tokens + work.tokens;
  queue.tokens = tokens;
  if (queue.live.size > 0) entry.shared = true;
  for (const other of queue.live) other.shared = true;
  queue.live.add(entry);
  const ahead = tokens > work.tokens ? `, behind ${tokens - work.tokens} in flight` : "";
  const what = `an embedding request of ${work.inputs} input${work.inputs === 1 ? "" : "s"} (about ${work.tokens} tokens at most${ahead})`;
  const watch = watchDeadline(lease, signal, deadline(tokens, lease.requestTimeoutMs, work.tokens), what);
  let disposed = false;
  return {
    signal: watch.signal,
    dispose: () => {
      if (disposed) return;
      disposed = true;
      queue.tokens -= work.tokens;
      queue.live.delete(entry);
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
 * embedding is asked again, once, as a chat's request is sent again. With `suspects`, an input
 * known to crash the server is refused unsent, and the inputs of a request the server died on
 * are counted (embed-suspects.ts). Errors are thrown as they came, a death's with `data.reason`
 * `server_failed` as a chat's.
 */
export async function watchedEmbed(
  lease: LlamaLease,
  input: readonly string[],
  signal: AbortSignal,
  deadline: EmbedDeadline = requestDeadlineMs,
  suspects?: CrashSuspects,
): Promise<Embedded> {
  const known = suspects?.convictedIn(input);
  if (known !== undefined) throw crashesServer(known, "");
  for (let again = false; ; again = true) {
    let inFlight: InFlight = { texts: [], shared: false };
    try {
      // Read once per launch, as the server turned ready (launch.ts): no input has more tokens.
      const context = await lease.launch.contextSize(signal);
      const out = await embed(lease, input, {
        signal,
        ...(context === undefined ? {} : { maxInputTokens: context }),
        watch: (work) => {
          inFlight = { texts: work.texts, shared: false };
          return queuedWatch(lease, signal, work, deadline, inFlight);
        },
      });
      lease.launch.taskServed();
      suspects?.served(input);
      return out;
    } catch (err) {
      await retryOrThrow(lease, err, signal, again).catch((thrown: unknown) => {
        throw diedWith(lease, thrown, signal, inFlight, input, suspects);
      });
    }
  }
}

/**
 * The error of a request the server died on (its death heard, or its connection lost), its
 * inputs counted; the one input of a request that crashed the server twice in a row is named,
 * if its request was alone on the server (another in flight may as well have been the cause).
 */
function diedWith(
  lease: LlamaLease,
  thrown: unknown,
  signal: AbortSignal,
  request: InFlight,
  input: readonly string[],
  suspects: CrashSuspects | undefined,
): unknown {
  // A crash's error (supervisor.ts onExit: its exit code); a server stopped on purpose ends
  // `cancelled`, and one the core restarted for a failure it found (an RPC worker lost, another
  // request's wedge: reportFailure, failReady) ends without an exit: no input's doing either.
  const death =
    lease.died.aborted &&
    thrown === lease.died.reason &&
    thrown instanceof CoreError &&
    thrown.code === "internal_error" &&
    thrown.data?.exit_code !== undefined;
  const lost =
    thrown instanceof LlmError && thrown.kind === "connection_lost" && !(thrown instanceof ConnectionRefused);
  const inFlight = request.texts;
  if (signal.aborted || inFlight.length === 0 || !(death || lost)) return thrown;
  const named = death
    ? new CoreError(thrown.code, thrown.message, { ...thrown.data, reason: "server_failed" })
    : thrown;
  // llama-server never kills itself with SIGKILL (its crashes are aborts and faults): the OS's
  // out-of-memory killer did, for memory anything on the machine took, or a person. Counted,
  // an innocent row narrowed to alone would be refused for good at the next such kill.
  if (death && thrown.data?.signal === "SIGKILL") return named;
  const [only] = inFlight;
  if (suspects?.died(inFlight, !request.shared) && only !== undefined)
    return crashesServer(input.indexOf(only), (thrown as Error).message);
  return named;
}

/** An input the server crashed on twice in a row, refused (docs/protocol.md#embed). */
function crashesServer(index: number, how: string): EmbedError {
  const last = how ? ` (the last time: ${how})` : "";
  return new EmbedError(
    "crashes_server",
    `input ${index} crashed the embedding model's llama-server each of the last ${CRASHES_TO_CONVICT} times it was sent${last}; it is not sent again`,
    { index },
  );
}
