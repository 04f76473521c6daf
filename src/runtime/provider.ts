import { findLlamaServerAsked } from "../config/find-binary-asked.ts";
import type { Config } from "../config/schema.ts";
import { defaultPlanDeps, probeAhead } from "../models/local-plan-deps.ts";
import { type LaunchPlan, planLaunch } from "../plan/launch.ts";
import { Supervisor } from "./supervisor.ts";
import type { PlanHint, StartFailureSlot } from "./supervisor-options.ts";

/** One model of several (docs/supervisor.md "Scheduling several models"): its files' name and plan. */
export interface SupervisorFor {
  /** Suffixes its log and pid record (supervisor-options.ts); absent: the model section's names. */
  instance?: string;
  /** Its launch plan; absent: the config's model planned on this machine. */
  plan?: (hint: PlanHint) => Promise<LaunchPlan>;
  /** Its last start failure, kept across its runtimes (supervisor-options.ts); absent: the supervisor's own. */
  startFailure?: StartFailureSlot;
}

/**
 * The supervisor wired to the config. `config` is read at each launch, not now: the core
 * creates the supervisor before it knows whether a config can be loaded.
 */
export function createSupervisor(config: () => Config, model: SupervisorFor = {}): Supervisor {
  const llama = () => config().llama;
  return new Supervisor({
    findBinary: () => findLlamaServerAsked(config()),
    plan: model.plan ?? ((hint) => planLaunch(withHint(config(), hint), defaultPlanDeps)),
    dataDir: () => config().app.data_dir,
    ...(model.instance ? { instance: model.instance } : {}),
    ...(model.startFailure ? { startFailure: model.startFailure } : {}),
    // Its memory is free: a probe begun while it held it is joined by no plan (a restart's, a
    // replan's after running out of GPU memory, the next model's).
    onChildGone: () => probeAhead.changed(),
    settings: () => {
      const l = llama();
      return {
        startupTimeoutMs: l.startup_timeout_s * 1000,
        stopGraceMs: l.stop_grace_s * 1000,
        maxRestarts: l.max_restarts,
        restartWindowMs: l.restart_window_s * 1000,
        restartBackoffMs: l.restart_backoff_ms,
        requestTimeoutMs: l.request_timeout_s * 1000,
        logMaxBytes: l.log_max_bytes,
        logFiles: l.log_files,
      };
    },
    fallbackSlots: () => {
      try {
        const p = llama().parallel;
        return typeof p === "number" ? p : 1;
      } catch {
        return 1;
      }
    },
  });
}

/** The config a start plans with: its model's, and how often starting it ran out of GPU memory. */
export function withHint<C extends Config>(config: C, hint: PlanHint): C & { gpu_out_of_memory?: number } {
  return hint.outOfMemory > 0 ? { ...config, gpu_out_of_memory: hint.outOfMemory } : config;
}
