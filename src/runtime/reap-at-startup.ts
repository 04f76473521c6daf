import type { Core } from "../server/core.ts";
import { logger } from "../util/logger.ts";
import { reapLeftover } from "./pid-file.ts";

/**
 * For serve-stdio start-up: stop llama-servers left by dead cores with this data directory,
 * without waiting for a chat. Never throws (no config yet is not an error here). Kept apart
 * from provider.ts so an idle core does not load the supervisor and the planner for it.
 */
export async function reapAtStartup(core: Core): Promise<void> {
  let dataDir: string;
  try {
    dataDir = core.config().config.app.data_dir;
  } catch {
    return;
  }
  try {
    await reapLeftover(dataDir);
  } catch (err) {
    logger.warn(`checking for a leftover llama-server failed: ${(err as Error).message}`);
  }
}
