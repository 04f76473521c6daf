import { join } from "node:path";
import { fileBytes } from "../../util/file-identity.ts";
import type { KvEntry } from "./kv-entry.ts";
import { listFolder, orphansOf, readSidecar } from "./kv-reads.ts";
import { type KvUse, OWN_FILE } from "./kv-use.ts";

// The KV folder's budget (kv-disk.ts, `llama.kv_disk_bytes`): what goes after a save.

/** What the budget's pass asks of the folder (kv-disk.ts `KvDisk`). */
export interface BudgetedFolder {
  readonly dir: string;
  readonly budgetBytes: number;
  usage(): KvUse;
  remove(name: string): void;
}

/**
 * The least recently used go until the whole fits, a state of ours without a readable sidecar
 * first (it can never be restored); `keep` (just saved) goes only if it alone is too big.
 */
export function keepBudget(disk: BudgetedFolder, keep: string): void {
  // Within it nothing goes: no sidecar read (each save read them all, up to 16 MiB each).
  if (disk.usage().bytes <= disk.budgetBytes) return;
  const described = entries(disk.dir);
  const orphans = orphansOf(described, listFolder(disk.dir)).map((name) => ({ name, usedAt: -1 }));
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

function entries(dir: string): { name: string; entry: KvEntry }[] {
  const out: { name: string; entry: KvEntry }[] = [];
  for (const f of listFolder(dir)) {
    const m = OWN_FILE.exec(f);
    if (m?.[2] !== "json") continue;
    const name = m[1] as string;
    const entry = readSidecar(join(dir, f));
    if (entry) out.push({ name, entry });
  }
  return out;
}
