import { join } from "node:path";
import { fileBytes } from "../../util/file-identity.ts";
import { type KvEntry, sameSave } from "./kv-entry.ts";
import {
  type Described,
  listFolder,
  orphansOf,
  readInPasses,
  readSidecar,
  sidecarNames,
} from "./kv-reads.ts";
import type { KvUseCount } from "./kv-use.ts";

// The KV folder's budget (kv-disk.ts, `llama.kv_disk_bytes`): what goes after a save.

/** What the budget's pass asks of the folder (kv-disk.ts `KvDisk`). */
export interface BudgetedFolder {
  readonly dir: string;
  readonly budgetBytes: number;
  remove(name: string): void;
}

/**
 * The folder counted afresh (another core's states count too), then the least recently used go
 * until the whole fits, a state of ours without a readable sidecar first (it can never be
 * restored); `keep` (just saved) goes only if it alone is too big. The count and the sidecars'
 * reads go a bounded number a turn of the loop (kv-use.ts `recount`, kv-reads.ts `readInPasses`):
 * all at once, a shared folder of 10^5 files held ping at every save. A state whose sidecar changed
 * since it was read is not evicted by that read (`asRead`).
 */
export async function keepBudget(disk: BudgetedFolder, count: KvUseCount, keep: string): Promise<void> {
  await count.recount(() => listFolder(disk.dir));
  // Within it nothing goes: no sidecar read (each save read them all, up to 16 MiB each).
  if (count.now().bytes <= disk.budgetBytes) return;
  // One listing: a state renamed into place after it is not taken for one without a sidecar.
  const listing = listFolder(disk.dir);
  const described = await sidecars(disk.dir, listing);
  const orphans = orphansOf(described, listing).map((name) => ({ name, usedAt: -1, entry: undefined }));
  const all = [
    ...orphans,
    ...described.map((e) => ({ name: e.name, usedAt: e.entry.used_at, entry: e.entry })),
  ];
  all.sort((a, b) => a.usedAt - b.usedAt);
  // What the count holds, less what removals left (held open): taken as gone, as before, the budget
  // not kept by evicting every other state over it. Only what the count took out comes off: a state
  // another core renamed into place after the count listed the folder (not counted) freed nothing
  // of the total, which its stat taken off left over the budget by up to its size.
  let left = 0;
  const total = () => count.now().bytes - left;
  for (const { name, entry } of all) {
    if (total() <= disk.budgetBytes) break;
    if (name === keep) continue;
    // The count put right: another core's erase during the pass freed what it counted, which a
    // stat now does not find (all else evicted then, and the state just saved).
    if (!asRead(disk.dir, name, entry)) {
      count.restat([name]);
      continue;
    }
    disk.remove(name);
    left += fileBytes(join(disk.dir, `${name}.bin`)) + fileBytes(join(disk.dir, `${name}.json`));
  }
  if (total() > disk.budgetBytes) disk.remove(keep);
}

/**
 * Whether `name`'s sidecar is still as the pass read it (`entry`; none: a state without one), so
 * its place in the order holds: read over several turns, a state restored (`touch`) or saved
 * again meanwhile went as the least recently used it had been, a just-saved state evicted.
 */
function asRead(dir: string, name: string, entry: KvEntry | undefined): boolean {
  const now = readSidecar(join(dir, `${name}.json`));
  if (!entry) return now === undefined;
  return now !== undefined && now.used_at === entry.used_at && sameSave(now, entry);
}

/** The readable sidecars `listing` names, read a bounded number a turn of the loop. */
async function sidecars(dir: string, listing: readonly string[]): Promise<Described> {
  let read: Described = [];
  // `done` runs at once where the names fit one pass (nothing returned to wait for).
  await readInPasses(
    sidecarNames(listing),
    (name) => readSidecar(join(dir, `${name}.json`)),
    async (d) => {
      read = d;
    },
  );
  return read;
}
