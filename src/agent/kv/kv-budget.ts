import { join } from "node:path";
import { fileBytes } from "../../util/file-identity.ts";
import { type Described, listFolder, orphansOf, readInPasses, readSidecar } from "./kv-reads.ts";
import { type KvUse, type KvUseCount, OWN_FILE } from "./kv-use.ts";

// The KV folder's budget (kv-disk.ts, `llama.kv_disk_bytes`): what goes after a save.

/** What the budget's pass asks of the folder (kv-disk.ts `KvDisk`). */
export interface BudgetedFolder {
  readonly dir: string;
  readonly budgetBytes: number;
  usage(): KvUse;
  remove(name: string): void;
}

/**
 * The folder counted afresh (another core's states count too), then the least recently used go
 * until the whole fits, a state of ours without a readable sidecar first (it can never be
 * restored); `keep` (just saved) goes only if it alone is too big. The count and the sidecars'
 * reads go a bounded number a turn of the loop (kv-use.ts `recount`, kv-reads.ts `readInPasses`):
 * all at once, a shared folder of 10^5 files held ping at every save.
 */
export async function keepBudget(disk: BudgetedFolder, count: KvUseCount, keep: string): Promise<void> {
  await count.recount(listFolder(disk.dir));
  // Within it nothing goes: no sidecar read (each save read them all, up to 16 MiB each).
  if (disk.usage().bytes <= disk.budgetBytes) return;
  // One listing: a state renamed into place after it is not taken for one without a sidecar.
  const listing = listFolder(disk.dir);
  const described = await sidecars(disk.dir, listing);
  const orphans = orphansOf(described, listing).map((name) => ({ name, usedAt: -1 }));
  const all = [...orphans, ...described.map((e) => ({ name: e.name, usedAt: e.entry.used_at }))].sort(
    (a, b) => a.usedAt - b.usedAt,
  );
  let total = disk.usage().bytes;
  for (const { name } of all) {
    if (total <= disk.budgetBytes) break;
    if (name === keep) continue;
    total -= fileBytes(join(disk.dir, `${name}.bin`)) + fileBytes(join(disk.dir, `${name}.json`));
    disk.remove(name);
  }
  if (total > disk.budgetBytes) disk.remove(keep);
}

/** The readable sidecars `listing` names, read a bounded number a turn of the loop. */
function sidecars(dir: string, listing: readonly string[]): Promise<Described> {
  const names = listing.flatMap((f) => {
    const m = OWN_FILE.exec(f);
    return m?.[2] === "json" ? [m[1] as string] : [];
  });
  return new Promise<Described>((resolve, reject) => {
    const done = async (described: Described) => resolve(described);
    readInPasses(names, (name) => readSidecar(join(dir, `${name}.json`)), done)?.catch(reject);
  });
}
