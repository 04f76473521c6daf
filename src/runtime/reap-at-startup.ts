import { findLlamaServerAsked } from "../config/find-binary-asked.ts";
import type { Config } from "../config/schema.ts";
import { sweepExportTemps } from "../store/export-temps.ts";
import { logger } from "../util/logger.ts";
import { llamaPrograms, reapLeftover } from "./pid-file.ts";
import { processStartedAt, procIdentity } from "./proc-info.ts";

/**
 * For serve-stdio: stop what dead cores with this data directory left running (llama-server,
 * MCP servers), without waiting for a chat. The stdio loop begins it once the config loads and
 * its stop path awaits it (beginning it if start-up had not yet), so a core told to exit at once
 * still finishes it. The processes' part is bounded (one grace period plus a kill, for all
 * leftovers at once); the export temp files' is not: each is zeroed and synced before it goes
 * (store/export-temps.ts), as long as its size takes on its disk.
 * Never throws. Kept apart from provider.ts so an idle core does not load the supervisor and
 * the planner for it.
 */
export async function reapAtStartup(config: Config): Promise<void> {
  try {
    await reapLeftover(config.app.data_dir, {
      configured: {
        "llama-server": llamaPrograms(await findLlamaServerAsked(config)),
        mcp: config.mcp_servers.map((s) => s.command),
      },
    });
  } catch (err) {
    logger.warn(`checking for leftover processes failed: ${(err as Error).message}`);
  }
  // And the temp file of an export a killed core left in the host's folder (store/export-temps.ts).
  try {
    await sweepExportTemps(
      config.app.data_dir,
      processStartedAt,
      (pid) => procIdentity(pid)?.start_time ?? null,
    );
  } catch (err) {
    logger.warn(`removing unfinished exports' temp files failed: ${(err as Error).message}`);
  }
}
