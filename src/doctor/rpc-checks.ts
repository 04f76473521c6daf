import type { Config, RpcWorkerConfig } from "../config/schema.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { checkWorkers } from "../rpc/check.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { sameWorkers } from "../rpc/same-worker.ts";
import { versionOutliers } from "../rpc/versions.ts";
import { versionText } from "../rpc/wire.ts";
import { describeWorker } from "../rpc/workers.ts";
import type { Check } from "./checks.ts";

/**
 * One doctor check per RPC worker of `llama.rpc` (`rpc:<host:port>`): does it answer, which
 * RPC protocol, its devices and free memory; a failure says which worker, why (refused, timed
 * out, wrong version…) and what to do. No worker configured, no check.
 */
export async function rpcChecks(config: Config, deps: Pick<PlanDeps, "workers">): Promise<Check[]> {
  const workers = config.llama.rpc;
  if (workers.length === 0) return [];
  return rpcChecksFrom(config, await (deps.workers ?? checkWorkers)(workers));
}

/** The same checks from answers already in hand (doctor asks once, for these and the plan). */
export function rpcChecksFrom(config: Config, reports: readonly WorkerReport[]): Check[] {
  const workers = config.llama.rpc;
  if (workers.length === 0) return [];
  const outliers = versionOutliers(reports);
  const same = sameWorkers(reports);
  return workers.map((w, i) => workerCheck(w, reports[i], outliers.get(w.endpoint), same.get(w.endpoint)));
}

const MIB = 1024 * 1024;

function workerCheck(
  w: RpcWorkerConfig,
  r: WorkerReport | undefined,
  outlier: string | undefined,
  twin: string | undefined,
): Check {
  const id = `rpc:${w.endpoint}`;
  if (!r)
    return { id, status: "fail", message: `${w.endpoint}: not checked`, data: { endpoint: w.endpoint } };
  const version = r.version ? versionText(r.version) : null;
  if (!r.ok) {
    return {
      id,
      status: "fail",
      message: `${w.endpoint}: ${r.message}`,
      // A deadline met after HELLO was answered: the worker is on and reachable, and one busy
      // with another client answers nothing (client.ts), so it froze mid-query.
      fix: r.failure === "timeout" && r.version ? frozenFix(w) : fixFor(w, r.failure),
      data: { endpoint: w.endpoint, failure: r.failure, version, ms: r.ms },
    };
  }
  const data = { endpoint: w.endpoint, version, devices: r.devices, memory_bytes: w.memory_bytes, ms: r.ms };
  if (twin) {
    return {
      id,
      status: "fail",
      message: `${w.endpoint}: ${twin}`,
      fix: "list each worker once in llama.rpc (one name or address per machine and port)",
      data: { ...data, failure: "same_worker", address: r.address },
    };
  }
  if (outlier) {
    return {
      id,
      status: "fail",
      message: `${w.endpoint}: ${outlier}`,
      fix: fixFor(w, "wrong_version"),
      data,
    };
  }
  const held = r.in_use ? " (the running llama-server holds it: as last checked)" : "";
  const budget =
    w.memory_bytes !== null ? `; budget ${Math.round(w.memory_bytes / MIB)} MiB from llama.rpc` : "";
  const free = r.devices.reduce((a, d) => a + d.free_bytes, 0);
  const margin = Math.max(512 * MIB, 0.1 * r.devices.reduce((a, d) => a + d.total_bytes, 0));
  if (w.memory_bytes === null && free <= margin) {
    return {
      id,
      status: "warn",
      message: `${w.endpoint}: ${describeWorker(r)}${held}: too little free for the plan to use`,
      fix: "free memory on that machine, or set memory_bytes for it in llama.rpc",
      data,
    };
  }
  return { id, status: "ok", message: `${w.endpoint}: ${describeWorker(r)}${budget}${held}`, data };
}

function frozenFix(w: RpcWorkerConfig): string {
  return `restart ggml-rpc-server on ${w.host} (it answered HELLO, then stopped in the middle of the query); if it freezes again, check that machine's memory and the network between`;
}

function fixFor(w: RpcWorkerConfig, failure: Extract<WorkerReport, { ok: false }>["failure"]): string {
  const local = w.host === "127.0.0.1" || w.host === "localhost";
  const start = local
    ? `ggml-rpc-server -p ${w.port}`
    : `ggml-rpc-server -H <its LAN address> -p ${w.port} (it listens on 127.0.0.1 only unless -H is given; trusted networks only)`;
  switch (failure) {
    case "refused":
      return `start the worker on ${w.host}: ${start}`;
    case "unresolved":
      return "check the host name in llama.rpc, or list the worker by the machine's IPv4 address (llama-server connects over IPv4 only)";
    case "unreachable":
      return `check the network path to ${w.host} (cable, Wi-Fi, VPN, routes)`;
    case "timeout":
      return `is ${w.host} on, and port ${w.port} open in its firewall? A worker serves one client at a time: stop any other llama-server using it`;
    case "closed":
    case "wrong_version":
      return "run ggml-rpc-server from the same llama.cpp build as llama-server, on every machine";
    case "malformed":
      return `port ${w.port} on ${w.host} is not a ggml-rpc-server: check the port in llama.rpc`;
  }
}
