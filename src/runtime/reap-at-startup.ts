import type { Core } from "../server/core.ts";
import { logger } from "../util/logger.ts";
import { findLlamaServer } from "./find-binary.ts";
import { llamaPrograms, reapLeftover } from "./pid-file.ts";

const reaps = new WeakMap<Core, Promise<void>>();

/**
 * For serve-stdio: stop what dead cores with this data directory left running (llama-server,
 * MCP servers), without waiting for a chat. One reap per core: start-up begins it and the
 * stop path awaits it (beginning it if start-up had not yet), so a core told to exit at once
 * still finishes it; it is bounded (one grace period plus a kill, for all leftovers at once).
 * Never throws (no config yet is not an error here). Kept apart from provider.ts so an idle
 * core does not load the supervisor and the planner for it.
 */
export function reapAtStartup(core: Core): Promise<void> {
  let reap = reaps.get(core);
  if (!reap) {
    reap = reapFor(core);
    reaps.set(core, reap);
  }
  return reap;
}

async function reapFor(core: Core): Promise<void> {
  let config: ReturnType<Core["config"]>["config"];
  try {
    config = core.config().config;
  } catch {
    return;
  }
  try {
    await reapLeftover(config.app.data_dir, {
      configured: {
        "llama-server": llamaPrograms(findLlamaServer(config)),
        mcp: config.mcp_servers.map((s) => s.command),
      },
    });
  } catch (err) {
    logger.warn(`checking for leftover processes failed: ${(err as Error).message}`);
  }
}
