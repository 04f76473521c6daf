import type { WorkerReport } from "./client.ts";

/**
 * One worker listed under two names (`localhost:50052` and `127.0.0.1:50052`, a host name and
 * its IP): the address each query reached tells them apart, not the text, and on this machine
 * the listening socket it reached (one on 0.0.0.0 listed under 127.0.0.1 and a LAN address). llama-server would
 * connect to it twice, and a worker serves one client at a time, so its start waits on the
 * second connection until the start-up timeout (docs/distributed.md). Each later name is
 * mapped to why it is left out; the first listed stays.
 */
export function sameWorkers(reports: readonly WorkerReport[]): Map<string, string> {
  const firstAt = new Map<string, string>();
  const out = new Map<string, string>();
  for (const r of reports) {
    if (!r.ok || r.address === undefined) continue;
    // One listener of this machine reached at two of its addresses is one worker too.
    const key = r.listener ?? r.address;
    const first = firstAt.get(key);
    const where = r.listener
      ? `both reach the one worker listening on port ${r.address.slice(r.address.lastIndexOf(":") + 1)} of this machine`
      : `both reach ${r.address}`;
    if (first === undefined) firstAt.set(key, r.endpoint);
    else if (first !== r.endpoint)
      out.set(
        r.endpoint,
        `the same worker as ${first} (${where}): a worker serves one client at a time, so llama-server would wait on its second connection until the start-up timeout; list each worker once in llama.rpc`,
      );
  }
  return out;
}
