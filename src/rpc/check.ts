import type { Endpoint } from "../config/rpc-endpoint.ts";
import type { RpcWorkerConfig } from "../config/schema.ts";
import { QUERY_TIMEOUT_MS, queryWorker, type WorkerReport } from "./client.ts";
import { versionText } from "./wire.ts";
import { type WorkerBook, workerBook } from "./workers.ts";

/**
 * Asks every configured worker at once (doctor, plan, and the supervisor before each start),
 * and keeps what it learns in the book. A worker the running llama-server holds is not asked
 * (it serves one client at a time and would time out): its last answer stands, marked in use;
 * one listed again under another name keeps its last answer too, unmarked (the plan leaves it out).
 * A worker whose version llama-server refused at a start stays refused while it reports that
 * version, even though it answers.
 */
export interface CheckOptions {
  book?: WorkerBook;
  timeoutMs?: number;
  query?: (target: Endpoint, options: { timeoutMs: number }) => Promise<WorkerReport>;
  /** The llama-server the answers are for (its path): a refusal by another build does not hold. */
  server?: string;
}

export async function checkWorkers(
  workers: readonly RpcWorkerConfig[],
  options: CheckOptions = {},
): Promise<WorkerReport[]> {
  const book = options.book ?? workerBook;
  const query = options.query ?? queryWorker;
  const timeoutMs = options.timeoutMs ?? QUERY_TIMEOUT_MS;
  return Promise.all(
    workers.map(async (w): Promise<WorkerReport> => {
      const held = book.last(w.endpoint);
      if (book.isInUse(w.endpoint) && held?.ok) return { ...held, in_use: true };
      // The same worker under another name (same_worker): busy with llama-server, it would time
      // out, and read as a worker to free. Its last answer still says which worker it is.
      if (held?.ok && book.heldUnderAnotherName(held)) return held;
      const report = refusedAgain(book, await query(w, { timeoutMs }), options.server);
      book.record(report);
      return report;
    }),
  );
}

function refusedAgain(book: WorkerBook, r: WorkerReport, server: string | undefined): WorkerReport {
  const refused = book.refusal(r.endpoint, server);
  if (!r.ok || refused === undefined) return r;
  const now = versionText(r.version);
  if (refused !== "?" && refused !== now) return r;
  return {
    endpoint: r.endpoint,
    ok: false,
    failure: "wrong_version",
    message: `llama-server refused its RPC protocol v${now} at the last start (run ggml-rpc-server from the same llama.cpp build as llama-server)`,
    version: r.version,
    ms: r.ms,
  };
}
