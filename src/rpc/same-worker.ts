import type { WorkerReport } from "./client.ts";

/**
 * One worker listed under two names (`localhost:50052` and `127.0.0.1:50052`, a host name and
 * its IP): the address each query reached tells them apart, not the text. llama-server would
 * connect to it twice, and a worker serves one client at a time, so its start waits on the
 * second connection until the start-up timeout (docs/distributed.md). Each later name is
 * mapped to why it is left out; the first listed stays.
 */
export function sameWorkers(reports: readonly WorkerReport[]): Map<string, string> {
  const firstAt = new Map<string, string>();
  const out = new Map<string, string>();
  for (const r of reports) {
    if (!r.ok || r.address === undefined) continue;
    const first = firstAt.get(r.address);
    if (first === undefined) firstAt.set(r.address, r.endpoint);
    else if (first !== r.endpoint)
      out.set(
        r.endpoint,
        `the same worker as ${first} (both reach ${r.address}): a worker serves one client at a time, so llama-server would wait on its second connection until the start-up timeout; list each worker once in llama.rpc`,
      );
  }
  return out;
}
