import type { Core } from "../server/core.ts";

/**
 * The plan preview. Until the planner lands it only validates the config: a missing or
 * invalid config throws its CoreError, so `plan` answers with the right code.
 */
export async function buildPlanReport(core: Core): Promise<Record<string, unknown>> {
  const loaded = core.config();
  return { config: loaded.file, status: "planner not available yet" };
}
