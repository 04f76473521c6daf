import type { Config } from "../config/schema.ts";
import { logger } from "../util/logger.ts";
import { reapLeftover } from "./pid-file.ts";

/**
 * For serve-stdio start-up: stop llama-servers left by dead cores with this data directory,
 * without waiting for a chat. Never throws. Kept apart from provider.ts so an idle core does
 * not load the supervisor and the planner for it.
 */
export async function reapAtStartup(config: Config): Promise<void> {
  try {
    await reapLeftover(config.app.data_dir);
  } catch (err) {
    logger.warn(`checking for a leftover llama-server failed: ${(err as Error).message}`);
  }
}
