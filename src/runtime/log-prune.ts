import { lstatSync, rmSync } from "node:fs";
import { join } from "node:path";
import { logger } from "../util/logger.ts";
import { namesIn } from "../util/names-in.ts";

/** Path models' log groups (their file and its rotations) kept in data_dir/logs, the new one included. */
export const PATH_LOGS_KEPT = 16;

/** `llama-server-path-<digest>.log` and its rotations (`.1`, `.2`…): a model a chat named by path. */
const PATH_LOG = /^(llama-server-path-[0-9a-f]{12}\.log)(\.\d+)?$/;

/**
 * Removes the least recently written path models' logs past PATH_LOGS_KEPT, `current` (the one
 * about to be written) never among them: each distinct path a chat ever named gets a log of its
 * own (server/model-runtime.ts `instanceOf`), up to `log_max_bytes` × `log_files`, and a host
 * that lets its users pick any file would otherwise fill the disk with them over the months.
 * Configured models' logs are few and named by the config: never pruned. One removed while its
 * server runs is made again at its next line (log-sink.ts).
 */
export function prunePathLogs(dir: string, current: string): void {
  const groups = new Map<string, { files: string[]; newest: number }>();
  for (const name of namesIn(dir)) {
    const group = PATH_LOG.exec(name)?.[1];
    if (group === undefined || group === current) continue;
    const st = lstatSync(join(dir, name), { throwIfNoEntry: false });
    if (!st?.isFile()) continue;
    const g = groups.get(group) ?? { files: [], newest: 0 };
    g.files.push(name);
    g.newest = Math.max(g.newest, st.mtimeMs);
    groups.set(group, g);
  }
  // Room for `current` only where it is a path log itself: a configured model's log is none.
  const others = PATH_LOG.test(current) ? PATH_LOGS_KEPT - 1 : PATH_LOGS_KEPT;
  const oldest = [...groups.values()].sort((a, b) => b.newest - a.newest).slice(others);
  for (const g of oldest) {
    for (const name of g.files) {
      try {
        rmSync(join(dir, name), { force: true });
      } catch (err) {
        logger.warn(`could not remove the old log ${join(dir, name)}: ${(err as Error).message}`);
      }
    }
  }
}
