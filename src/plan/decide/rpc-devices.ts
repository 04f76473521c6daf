import type { RpcWorkerConfig } from "../../config/schema.ts";
import { CoreError, isCoreError } from "../../protocol/errors.ts";
import type { Decision, WorkerPlan } from "../../protocol/plan.ts";
import type { WorkerReport } from "../../rpc/client.ts";
import { sameWorkers } from "../../rpc/same-worker.ts";
import { versionOutliers } from "../../rpc/versions.ts";
import { versionText } from "../../rpc/wire.ts";
import { describeWorker } from "../../rpc/workers.ts";
import { flags } from "../argv.ts";
import type { Estimate } from "../estimate.ts";
import type { Budgets, GpuBudget } from "./budgets.ts";
import type { Placement } from "./context-and-layers.ts";
import type { Decided } from "./decided.ts";

/**
 * llama.cpp RPC workers as devices of the plan (docs/distributed.md). Each worker that answered its
 * query brings its devices, numbered as llama-server numbers them (`RPC0`, `RPC1`… over the workers
 * passed to `--rpc`, in order), each with a budget: what it reports free minus a margin (the worker
 * may be a CPU sharing memory with its OS, and the query does not say, so RAM's margin), or
 * `memory_bytes` from the config as given. A worker that did not answer, answered wrongly, or has
 * nothing to spend is left out, with the reason: the plan never counts on it.
 */

const MIB = 1024 * 1024;

export interface RpcDevices {
  /** A budget per device of the workers used, in llama-server's order. */
  budgets: GpuBudget[];
  /** The endpoints for `--rpc`. */
  used: string[];
  workers: WorkerPlan[];
  warnings: string[];
}

/** RAM's margin (budgets.ts): the larger one, since a worker's device may well be its RAM. */
function workerMargin(total: number): number {
  return Math.max(512 * MIB, Math.floor(total * 0.1));
}

/**
 * The most offload devices `--tensor-split` may list: llama-server refuses a list of
 * llama_max_devices() (16) shares or more ("got 16 input configs, but system only has 16
 * devices", common/arg.cpp's `>=`), so every start failed past it.
 */
export const MAX_SPLIT_DEVICES = 15;

export function rpcDevices(
  config: readonly RpcWorkerConfig[],
  reports: readonly WorkerReport[],
  localGpus = 0,
): RpcDevices {
  const byEndpoint = new Map(reports.map((r) => [r.endpoint, r]));
  const outliers = versionOutliers(reports);
  const same = sameWorkers(reports);
  const out: RpcDevices = { budgets: [], used: [], workers: [], warnings: [] };
  for (const w of config) {
    const r = byEndpoint.get(w.endpoint);
    const version = r?.version ? versionText(r.version) : null;
    const leave = (left_out: WorkerPlan["left_out"] & string, reason: string) => {
      out.workers.push({
        endpoint: w.endpoint,
        status: "left_out",
        reason,
        left_out,
        version,
        devices: [],
        memory_bytes: w.memory_bytes,
      });
      out.warnings.push(`RPC worker ${w.endpoint} left out: ${reason}`);
    };
    if (!r) {
      leave("unchecked", "not checked");
      continue;
    }
    if (!r.ok) {
      leave(r.failure, r.message);
      continue;
    }
    const twin = same.get(w.endpoint);
    if (twin) {
      leave("same_worker", twin);
      continue;
    }
    const outlier = outliers.get(w.endpoint);
    if (outlier) {
      leave("wrong_version", outlier);
      continue;
    }
    const devices = deviceBudgets(w, r, out.budgets.length);
    const room = MAX_SPLIT_DEVICES - localGpus - out.budgets.length;
    if (devices.length > room) {
      leave(
        "too_many_devices",
        `its ${devices.length} device${devices.length === 1 ? "" : "s"} would make more than the ${MAX_SPLIT_DEVICES} devices llama-server's --tensor-split takes (${out.budgets.length} of the workers before it and ${localGpus} local GPU${localGpus === 1 ? "" : "s"} already)`,
      );
      continue;
    }
    if (devices.every((d) => d.budget <= 0)) {
      const free = r.devices.reduce((a, d) => a + d.free_bytes, 0);
      leave("no_memory", `only ${mib(free)} free, within the ${mib(devices[0]?.margin ?? 0)} kept free`);
      continue;
    }
    out.budgets.push(...devices);
    out.used.push(w.endpoint);
    out.workers.push({
      endpoint: w.endpoint,
      status: "used",
      reason:
        describeWorker(r) +
        (w.memory_bytes !== null ? `; budget ${mib(w.memory_bytes)} from llama.rpc` : "") +
        (r.in_use ? " (as last checked: the running llama-server holds it)" : ""),
      left_out: null,
      version,
      devices: devices.map((d) => d.remote!.id),
      memory_bytes: w.memory_bytes,
    });
  }
  return out;
}

/** The worker's devices as budgets; a config budget is spread in proportion to what each reports. */
function deviceBudgets(
  w: RpcWorkerConfig,
  r: Extract<WorkerReport, { ok: true }>,
  first: number,
): GpuBudget[] {
  const reported = r.devices.reduce((a, d) => a + d.free_bytes, 0);
  return r.devices.map((d, k): GpuBudget => {
    const n = first + k;
    const share = reported > 0 ? d.free_bytes / reported : 1 / r.devices.length;
    const override = w.memory_bytes !== null ? Math.floor(w.memory_bytes * share) : null;
    const margin = override !== null ? 0 : workerMargin(d.total_bytes);
    const available = override ?? d.free_bytes;
    return {
      i: n,
      total: override ?? d.total_bytes,
      available,
      margin,
      budget: Math.max(0, available - margin),
      unified: false,
      name: r.devices.length > 1 ? `RPC worker ${w.endpoint} device ${k}` : `RPC worker ${w.endpoint}`,
      remote: { id: `rpc${n}`, endpoint: w.endpoint, device: k },
    };
  });
}

/** The local budgets with the workers' devices in front, as llama-server orders its devices. */
export function withRpcDevices(local: Budgets, rpc: RpcDevices): Budgets {
  return { ram: local.ram, gpus: [...rpc.budgets, ...local.gpus] };
}

/** `--rpc` with the workers used, or nothing (and why) when none is. */
export function rpcDecision(rpc: RpcDevices): Decision {
  const left = rpc.workers.filter((w) => w.status === "left_out");
  const leftText = left.length
    ? `; left out: ${left.map((w) => `${w.endpoint} (${w.reason})`).join("; ")}`
    : "";
  if (rpc.used.length === 0) {
    return {
      name: "rpc",
      value: null,
      source: "config",
      flags: [],
      reason: `no RPC worker can be used: the plan uses this machine alone${leftText}`,
    };
  }
  const used = rpc.workers.filter((w) => w.status === "used");
  return {
    name: "rpc",
    value: rpc.used.join(","),
    source: "config",
    flags: flags.rpc(rpc.used),
    reason: `${used.length} of ${rpc.workers.length} workers answered: ${used.map((w) => `${w.endpoint} (${w.reason})`).join("; ")}${leftText}`,
  };
}

/**
 * `--tensor-split`, one share per device in llama-server's order (RPC devices, then local
 * GPUs): the layer counts of the chosen estimate, the output head counted on the last device
 * that holds it, so llama-server places exactly what the device table shows. Null when no
 * worker is used or nothing is offloaded (all zeros would mean llama-server's own split).
 */
export function decideTensorSplit(
  budgets: Budgets,
  est: Estimate,
  nLayer: number,
  ngl: number,
): Decided<number[]> | null {
  if (!budgets.gpus.some((g) => g.remote)) return null;
  const outputOnDevice = est.gpus.length > 0 && ngl > nLayer;
  const shares = est.gpus.map((u, k) => u.layers + (outputOnDevice && k === est.gpus.length - 1 ? 1 : 0));
  if (shares.every((s) => s === 0)) return null;
  const value = shares.join(",");
  const perDevice = budgets.gpus.map((g, k) => {
    const id = g.remote?.id ?? `gpu${g.i}`;
    const where = g.remote ? g.remote.endpoint : g.name;
    const layers = est.gpus[k]?.layers ?? 0;
    const head = outputOnDevice && k === est.gpus.length - 1 ? " and the output head" : "";
    return `${id} (${where}) ${layers} layer${layers === 1 ? "" : "s"}${head} of its ${mib(g.budget)} budget`;
  });
  const cpuLayers = est.cpu.layers;
  return {
    value: shares,
    decision: {
      name: "tensor_split",
      value,
      source: "auto",
      flags: flags.tensorSplit(shares),
      reason:
        `layers per device in llama-server's order (RPC workers first, then local GPUs), in proportion to their budgets: ${perDevice.join("; ")}; ` +
        `the CPU keeps ${cpuLayers} layer${cpuLayers === 1 ? "" : "s"} and the token embeddings`,
    },
  };
}

/** `-ngl`'s reason when workers take layers: the same choice, told with RPC workers in it. */
export function rpcLayersReason(ngl: number, nLayer: number, localGpus: number): string {
  const where = localGpus > 0 ? "the RPC workers and the GPU" : "the RPC workers";
  if (ngl >= nLayer + 1) return `all ${nLayer} layers and the output head fit on ${where}`;
  if (ngl === 0) return `not even one layer fits on ${where} beside their buffers: CPU only`;
  return `${Math.min(ngl, nLayer)} of ${nLayer} layers fit on ${where}; the rest run on the CPU`;
}

/**
 * The RPC part of the decisions once context and layers are placed: `-c`'s and `-ngl`'s
 * reasons told with the workers in them, then `--rpc` (whenever `llama.rpc` is set) and
 * `--tensor-split`. Without workers the two reasons are returned as they were.
 */
export function rpcPlacement(
  rpc: RpcDevices,
  budgets: Budgets,
  placed: Pick<Placement, "context" | "gpuLayers" | "trial">,
  nLayer: number,
  localGpus: number,
  configured: boolean,
): { context: Decision; gpuLayers: Decision; flags: Decision[]; tensorSplit: number[] | null } {
  const ngl = placed.gpuLayers.value.layers;
  const split = decideTensorSplit(budgets, placed.trial.est, nLayer, ngl);
  const decisions = [...(configured ? [rpcDecision(rpc)] : []), ...(split ? [split.decision] : [])];
  const tensorSplit = split?.value ?? null;
  if (rpc.budgets.length === 0)
    return {
      context: placed.context.decision,
      gpuLayers: placed.gpuLayers.decision,
      flags: decisions,
      tensorSplit,
    };
  const where = localGpus > 0 ? "on the RPC workers and the GPU" : "on the RPC workers";
  const context = placed.context.decision;
  return {
    context: { ...context, reason: context.reason.replace("on the GPU", where) },
    gpuLayers: { ...placed.gpuLayers.decision, reason: rpcLayersReason(ngl, nLayer, localGpus) },
    flags: decisions,
    tensorSplit,
  };
}

/** Runs the placement; its model_plan_error names the workers that were left out. */
export function explainingLeftOut<T>(rpc: RpcDevices, place: () => T): T {
  try {
    return place();
  } catch (err) {
    throw withLeftOutWorkers(err, rpc);
  }
}

/**
 * A model_plan_error made while some configured workers were left out names them: the model
 * might fit with them, and the user can bring them back.
 */
export function withLeftOutWorkers(err: unknown, rpc: RpcDevices): unknown {
  if (!isCoreError(err) || err.code !== "model_plan_error") return err;
  const left = rpc.workers.filter((w) => w.status === "left_out");
  if (left.length === 0) return err;
  const names = left.map((w) => `${w.endpoint} (${w.reason})`).join("; ");
  return new CoreError(
    "model_plan_error",
    `${err.message}; planned without the RPC worker${left.length > 1 ? "s" : ""} it could not use: ${names}`,
    { ...err.data, rpc_workers_left_out: left.map((w) => ({ endpoint: w.endpoint, reason: w.reason })) },
  );
}

function mib(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${Math.round(n / MIB)} MiB`;
}
