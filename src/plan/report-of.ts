import type {
  ChatTemplateReport,
  Decision,
  DevicePlan,
  Plan,
  ProjectorPlan,
  WorkerPlan,
} from "../protocol/plan.ts";
import { PLAN_DIALECT, renderArgv } from "./argv.ts";
import type { LaunchPlan } from "./launch-plan.ts";
import { shownArgs } from "./secret-args.ts";

/** The plan report: the launch's values, how each was decided, and the argv they render to. */
export function reportOf(
  launch: LaunchPlan,
  placed: {
    all: boolean;
    devices: DevicePlan[];
    workers: WorkerPlan[];
    template: ChatTemplateReport;
    /** The vision projector launched with the model; absent: none. */
    projector?: ProjectorPlan | null;
  },
  decisions: Decision[],
  warnings: string[],
): Plan {
  const { devices, workers } = placed;
  return {
    model_path: launch.model_path,
    slots: launch.slots,
    context_per_slot: launch.context_per_slot,
    context_total: launch.context_per_slot * launch.slots,
    gpu_layers: launch.gpu_layers,
    gpu_layers_all: placed.all,
    threads: launch.threads,
    flash_attn: launch.flash_attn,
    cache_type_k: launch.cache_type_k,
    cache_type_v: launch.cache_type_v,
    mmap: launch.mmap,
    mlock: launch.mlock,
    max_tokens: launch.max_tokens,
    devices,
    workers,
    decisions,
    // Shown, never spawned: a key or token in extra_args is masked (secret-args.ts).
    argv: shownArgs(renderArgv(launch, PLAN_DIALECT)),
    chat_template: placed.template,
    embedding: launch.embedding ?? null,
    vision: placed.projector != null,
    projector: placed.projector ?? null,
    warnings,
  };
}
