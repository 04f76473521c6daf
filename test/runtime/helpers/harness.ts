import { join } from "node:path";
import type { LaunchPlan } from "../../../src/plan/launch.ts";
import type { CoreError } from "../../../src/protocol/errors.ts";
import type { ModelRuntime } from "../../../src/runtime/model-runtime.ts";
import { Scheduler } from "../../../src/runtime/scheduler.ts";
import { Supervisor } from "../../../src/runtime/supervisor.ts";
import type { SupervisorOptions, SupervisorSettings } from "../../../src/runtime/supervisor-options.ts";
import {
  fakeLlamaKnobs,
  writeFakeLlamaServer,
  writeFakeModel,
} from "../../fixtures/llama-stand-in/binary.ts";

export const SETTINGS: SupervisorSettings = {
  startupTimeoutMs: 10_000,
  stopGraceMs: 1000,
  maxRestarts: 2,
  restartWindowMs: 300_000,
  restartBackoffMs: 50,
  requestTimeoutMs: 5000,
  logMaxBytes: 1024 * 1024,
  logFiles: 2,
};

/**
 * A launch plan for tests: the stand-in's (or a real server's) model on the CPU, one slot,
 * 2048 tokens, llama-server's defaults elsewhere; `over` sets the decisions a test is about.
 */
export function testPlan(model: string, over: Partial<LaunchPlan> = {}): LaunchPlan {
  return {
    model_path: model,
    model_name: null,
    model_bytes: 0,
    slots: 1,
    context_per_slot: 2048,
    max_tokens: null,
    gpu_layers: 0,
    rpc_workers: [],
    tensor_split: null,
    threads: 2,
    flash_attn: "auto",
    cache_type_k: "f16",
    cache_type_v: "f16",
    mmap: true,
    mlock: false,
    jinja: true,
    idle_sleep_s: 0,
    cache_ram_mib: 0,
    slot_save_path: null,
    extra_args: [],
    ...over,
  };
}

export interface Harness {
  supervisor: Supervisor;
  binary: string;
  model: string;
  dataDir: string;
}

/**
 * A supervisor wired to the stand-in in `dir`. `env` is the parent environment the supervisor
 * builds the child's from; its FAKE_LLAMA_* knobs go into the stand-in's script instead.
 */
export function makeSupervisor(
  dir: string,
  opts: {
    env?: Record<string, string>;
    settings?: Partial<SupervisorSettings>;
    slots?: number;
    extraArgs?: string[];
    /** Decisions of the plan (idle sleep, memory mode…) beyond slots and extra args. */
    plan?: Partial<LaunchPlan>;
    options?: Partial<SupervisorOptions>;
  } = {},
): Harness {
  const binary = writeFakeLlamaServer(dir, fakeLlamaKnobs({ FAKE_LLAMA_LOAD_MS: "20", ...opts.env }));
  const model = writeFakeModel(dir);
  const dataDir = join(dir, "data");
  const slots = opts.slots ?? 1;
  const plan = testPlan(model, { slots, extra_args: opts.extraArgs ?? [], ...opts.plan });
  const supervisor = new Supervisor({
    findBinary: () => ({ path: binary }),
    plan: async () => plan,
    dataDir: () => dataDir,
    settings: () => ({ ...SETTINGS, ...opts.settings }),
    env: { ...process.env, FAKE_LLAMA_LOAD_MS: "20", ...opts.env },
    reap: false,
    ...opts.options,
  });
  return { supervisor, binary, model, dataDir };
}

/**
 * A real supervisor as one model's runtime under a scheduler (several models), its plan 1 GiB of
 * 10; `runtime` makes one per load (a new one after a failed load).
 */
export function schedulerOver(runtime: () => Supervisor): Scheduler {
  const GIB = 1024 ** 3;
  const runtimeOf = (supervisor: Supervisor): ModelRuntime => ({
    acquire: (s, p, o) => supervisor.acquire(s, p, o),
    ready: (s, p, o) => supervisor.ready(s, p, o),
    prestart: () => supervisor.prestart(),
    asked: () => supervisor.asked(),
    slots: () => supervisor.slots(),
    snapshot: () => supervisor.snapshot(),
    stop: (o) => supervisor.stop(o),
    plannedBytes: async () => ({ bytes: { gpu0: GIB }, budget: { gpu0: 10 * GIB } }),
    beforeUnload: async () => {},
  });
  return new Scheduler({
    runtime: () => runtimeOf(runtime()),
    settings: () => ({ loadWaitMs: 120_000, idleUnloadMs: 0 }),
    configured: () => [{ name: "a", pinned: false }],
    cancelChats: () => {},
  });
}

export function chatBody(stream: boolean, content = "hello") {
  return JSON.stringify({ messages: [{ role: "user", content }], stream });
}

/** One non-streamed chat on a lease's server: its status, the body read. */
export async function chatStatus(lease: { baseUrl: string; apiKey: string }): Promise<number> {
  const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${lease.apiKey}` },
    body: chatBody(false),
  });
  await res.text();
  return res.status;
}

/** What `p` rejects with (a test of a failure); throws when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<CoreError> {
  try {
    await p;
  } catch (err) {
    return err as CoreError;
  }
  throw new Error("expected a rejection");
}

const OWNER = join(import.meta.dir, "owner.ts");

/**
 * A core stand-in in a process of its own (owner.ts) with a ready llama-server: the process,
 * to kill outright, and its child's pid. `env` reaches the owner (its FAKE_LLAMA_* knobs the
 * stand-in).
 */
export async function ownerWithChild(
  dir: string,
  env: Record<string, string | undefined> = process.env,
): Promise<{ owner: ReturnType<typeof Bun.spawn>; childPid: number }> {
  const owner = Bun.spawn([process.execPath, OWNER, dir], { stdout: "pipe", stderr: "ignore", env });
  const reader = (owner.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { owner, childPid: Number(text.match(/READY (\d+)/)?.[1]) };
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// The one shared wait, re-exported for the runtime tests that import their helpers from here.
export { waitFor } from "../../fixtures/wait.ts";
