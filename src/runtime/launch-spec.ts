import type { Core } from "../server/core.ts";

/**
 * Interim stand-in for the planner's `src/plan/launch.ts` (same shape): the lead swaps
 * `planLaunch` in at merge. The argv carries no --host/--port/--api-key; the supervisor adds
 * those itself.
 */
export interface LaunchPlan {
  argv: string[];
  slots: number;
  context_per_slot: number;
  model_path: string;
  max_tokens: number | null;
}

const FALLBACK_CONTEXT = 4096;

/** A minimal plan read straight from the config: no hardware probing. */
export async function planLaunchFromConfig(core: Core): Promise<LaunchPlan> {
  const { config } = core.config();
  const slots = typeof config.llama.parallel === "number" ? config.llama.parallel : 1;
  const perSlot = typeof config.model.context === "number" ? config.model.context : FALLBACK_CONTEXT;
  const argv = ["-m", config.model.path, "-c", String(perSlot * slots), "-np", String(slots), "--jinja"];
  if (typeof config.model.gpu_layers === "number") argv.push("-ngl", String(config.model.gpu_layers));
  if (typeof config.llama.threads === "number") argv.push("-t", String(config.llama.threads));
  argv.push(...config.llama.extra_args);
  return {
    argv,
    slots,
    context_per_slot: perSlot,
    model_path: config.model.path,
    max_tokens: config.model.max_tokens,
  };
}
