import type { LaunchPlan } from "../plan/launch-plan.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateDir } from "../util/private-fs.ts";

/**
 * llama-server refuses a `--slot-save-path` that is not a folder ("not a directory", exit 1),
 * so it is made (owner-only) before the spawn; one that cannot be made leaves the flag out: the
 * server still starts, only without KV state on disk.
 */
export function withSlotFolder(plan: LaunchPlan): LaunchPlan {
  if (plan.slot_save_path === null) return plan;
  try {
    ensurePrivateDir(plan.slot_save_path);
    return plan;
  } catch (err) {
    logger.warn(
      `the KV state folder ${plan.slot_save_path} cannot be made (${(err as Error).message}): llama-server starts without saving conversations to disk`,
    );
    return { ...plan, slot_save_path: null };
  }
}
