import type { Database } from "bun:sqlite";
import type { Stats } from "node:fs";
import type { DriveAnswers } from "../util/drive-answers.ts";
import { within } from "../util/within.ts";
import { onDisk } from "./folder-names.ts";
import type { MemoryHit } from "./memory-store.ts";

/**
 * How long recall's check of a folder passage waits for its file's stat, as it waits for the
 * query's vector: a drive that does not answer by then (a network share offline, a disk spinning
 * up) has its passages left out of this turn, its stat still asked once, off the turn. Awaited
 * without a bound, a share gone offline held every chat whose recall found one of its passages,
 * for good on a hard mount.
 */
const CURRENT_STAT_MS = 1000;

/** What `staleFolderFiles` found: the files not as indexed, and the folders to walk again for them. */
export interface StaleFiles {
  stale: Set<string>;
  /** Folders holding a file gone or changed (not one whose drive did not answer: it hangs). */
  changed: Set<string>;
  /** A file not recorded, or not as it was: a walk is due. */
  walk: boolean;
}

/**
 * The folder files of `hits` (FolderIndex.current) whose file is not as it was indexed (gone, or
 * its size or modification time changed), or cannot be checked now.
 */
export async function staleFolderFiles(
  db: Database,
  hits: readonly MemoryHit[],
  drives: DriveAnswers,
): Promise<StaleFiles> {
  const found: StaleFiles = { stale: new Set(), changed: new Set(), walk: false };
  const paths = [...new Set(hits.filter((h) => h.cite.kind === "folder").map((h) => h.cite.id))];
  if (paths.length === 0) return found;
  const known = new Map(
    (
      db
        .query(
          "SELECT path, root, size, mtime_ms FROM memory_files WHERE path IN (SELECT value FROM json_each(?))",
        )
        .all(JSON.stringify(paths)) as { path: string; root: string; size: number; mtime_ms: number }[]
    ).map((r) => [r.path, r]),
  );
  await Promise.all(
    paths.map(async (path) => {
      const k = known.get(path);
      const st = await statNow(k ? onDisk(k.root, path) : path, drives);
      if (st === "late") return void found.stale.add(path);
      const asIndexed = st?.isFile() && k && st.size === k.size && Math.round(st.mtimeMs) === k.mtime_ms;
      if (asIndexed) return;
      found.stale.add(path);
      found.walk = true;
      if (k) found.changed.add(k.root);
    }),
  );
  return found;
}

/**
 * A file's stat, or `late` once CURRENT_STAT_MS pass: through `drives` (one stat a path, never
 * every file thread held by them), a name that is not UTF-8 by its bytes (`onDisk`) too: asked
 * apart, each recall of it on a share gone offline held one more thread for good.
 * Undefined: it failed (a missing file).
 */
function statNow(path: string | Buffer, drives: DriveAnswers): Promise<Stats | undefined | "late"> {
  const asked = drives.statOf(path).then((st) => (st === null ? undefined : st));
  return within(asked, Math.min(drives.waitMs, CURRENT_STAT_MS), "late" as const);
}
