import { join } from "node:path";
import type { LaunchPlan } from "../../../src/plan/launch.ts";
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

export function chatBody(stream: boolean, content = "hello") {
  return JSON.stringify({ messages: [{ role: "user", content }], stream });
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
