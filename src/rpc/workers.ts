import type { RpcWorkerStatus } from "../protocol/rpc-workers.ts";
import { type FileIdentity, fileIdentity, sameFile } from "../util/file-identity.ts";
import type { WorkerReport } from "./client.ts";
import { versionText } from "./wire.ts";

/**
 * What this process last learned about each RPC worker: the latest query (by doctor, plan or
 * the supervisor before a start), whether the running llama-server holds it (a worker serves
 * one client at a time, so it cannot be asked while in use), whether llama-server lost it or
 * refused its protocol version. Read by `status` without touching the network.
 */

/** One worker in `status`: the protocol's wire shape. */
export type WorkerStatus = RpcWorkerStatus;
export type WorkerState = WorkerStatus["state"];

/** The holder of a launch that names none: the one llama-server of a single model. */
const SOLE = {};

export class WorkerBook {
  private readonly reports = new Map<string, { report: WorkerReport; at: number }>();
  /**
   * Who holds which workers: one llama-server per model of several, each launch its own holder
   * (the one supervisor of a single model: the default). One model's start or end, an embedding
   * model's without workers among them, leaves the others' workers held.
   */
  private readonly inUse = new Map<object, Set<string>>();
  private readonly lostWhy = new Map<string, string>();
  /** The version llama-server refused, and which llama-server (its binary as it was) refused it. */
  private readonly refused = new Map<string, { version: string; server: FileIdentity | undefined }>();

  record(report: WorkerReport, at = Date.now()): void {
    this.reports.set(report.endpoint, { report, at });
    // A newer answer (or failure) says more than what happened at the last launch.
    this.lostWhy.delete(report.endpoint);
  }

  last(endpoint: string): WorkerReport | undefined {
    return this.reports.get(endpoint)?.report;
  }

  /** A llama-server started with these workers: they are its clients until `released`. */
  launched(endpoints: readonly string[], holder: object = SOLE): void {
    if (endpoints.length === 0) this.inUse.delete(holder);
    else this.inUse.set(holder, new Set(endpoints));
  }

  released(holder: object = SOLE): void {
    this.inUse.delete(holder);
  }

  isInUse(endpoint: string): boolean {
    for (const held of this.inUse.values()) if (held.has(endpoint)) return true;
    return false;
  }

  /**
   * Whether this answer reached a worker that a running llama-server holds under another entry
   * (`localhost:P` beside `127.0.0.1:P`): the address, or this machine's listener, tells.
   */
  heldUnderAnotherName(r: WorkerReport): boolean {
    if (!r.ok || r.address === undefined) return false;
    const key = r.listener ?? r.address;
    for (const held of this.inUse.values())
      for (const endpoint of held) {
        const h = this.last(endpoint);
        if (endpoint !== r.endpoint && h?.ok && (h.listener ?? h.address) === key) return true;
      }
    return false;
  }

  lost(endpoint: string, why: string): void {
    for (const held of this.inUse.values()) held.delete(endpoint);
    this.lostWhy.set(endpoint, why);
  }

  /**
   * llama-server refused this worker's protocol version. When its log did not say which, the
   * version the worker last reported is taken: a worker that is updated is asked again. `server`:
   * the binary that refused it, so that another one (llama.binary changed, or the file replaced
   * by an upgrade) asks the worker again.
   */
  refuseVersion(endpoint: string, version: string | null, server?: string): void {
    const last = this.reports.get(endpoint)?.report;
    this.refused.set(endpoint, {
      version: version ?? (last?.version ? versionText(last.version) : "?"),
      server: server === undefined ? undefined : fileIdentity(server),
    });
  }

  /**
   * The version llama-server refused for this worker, while the worker still reports it; none
   * when `server`, the llama-server that will run, is not the one that refused it. Either
   * unknown: the refusal stands.
   */
  refusal(endpoint: string, server?: string): string | undefined {
    const refused = this.refused.get(endpoint);
    if (refused?.server && server !== undefined && !sameFile(refused.server, fileIdentity(server)))
      return undefined;
    return refused?.version;
  }

  snapshot(configured: readonly string[]): WorkerStatus[] {
    return configured.map((endpoint) => this.status(endpoint));
  }

  private status(endpoint: string): WorkerStatus {
    const seen = this.reports.get(endpoint);
    const r = seen?.report;
    const version = r?.version ? versionText(r.version) : null;
    const devices = r?.ok ? r.devices : [];
    const base = { endpoint, version, devices, checked_at: seen?.at ?? null };
    const lost = this.lostWhy.get(endpoint);
    if (lost) return { ...base, state: "lost", message: lost };
    if (this.isInUse(endpoint))
      return { ...base, state: "in_use", message: "used by the running llama-server" };
    if (!r) return { ...base, state: "unchecked", message: "not checked yet" };
    if (!r.ok) return { ...base, state: r.failure, message: r.message };
    return { ...base, state: "ok", message: describeWorker(r) };
  }
}

/** "RPC v5.1.0, 1 device: 23.5 GiB free of 23.5 GiB". */
export function describeWorker(r: Extract<WorkerReport, { ok: true }>): string {
  const free = r.devices.reduce((a, d) => a + d.free_bytes, 0);
  const total = r.devices.reduce((a, d) => a + d.total_bytes, 0);
  const n = r.devices.length;
  return `RPC v${versionText(r.version)}, ${n} device${n === 1 ? "" : "s"}: ${gib(free)} free of ${gib(total)}`;
}

function gib(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${(n / 2 ** 20).toFixed(0)} MiB`;
}

/** The process's book: the supervisor, plan and doctor of one core share what they learn. */
export const workerBook = new WorkerBook();

/**
 * For `status`: each configured worker's last known state, read from memory (no network: a
 * worker in use by llama-server could not answer anyway).
 */
export function rpcWorkerSnapshot(
  configured: readonly string[],
  book: WorkerBook = workerBook,
): WorkerStatus[] {
  return book.snapshot(configured);
}
