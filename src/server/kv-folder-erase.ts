import { existsSync } from "node:fs";
import type { KvDisk } from "../agent/kv/kv-disk.ts";

/**
 * Erases of saved KV state (`sessions.delete`, `users.delete`, `documents.delete`) over data_dir/kv
 * as it lies on disk, after the prompt reuse's own erase: with saving off (`llama.kv_disk_bytes`
 * 0) no prompt reuse looks after the folder, yet a run with saving on may have left files there,
 * which an erase takes all the same (docs/agent.md#prompt-reuse).
 */
export class KvFolderErase {
  private folder: KvDisk | null | undefined;

  constructor(
    /** The folder (data_dir/kv). */
    private readonly dir: () => string,
    /** The budgeted folder prompt reuse saves into; null with saving off. */
    private readonly budgeted: () => KvDisk | null,
  ) {}

  /** Runs `erase` over the folder (none: it does not exist); the files it could not remove (KvDisk.unremovedBy). */
  run(erase: (disk?: KvDisk) => void): string[] {
    if (this.folder === undefined) {
      const { KvDisk } = require("../agent/kv/kv-disk.ts") as typeof import("../agent/kv/kv-disk.ts");
      const dir = this.dir();
      this.folder = this.budgeted() ?? (existsSync(dir) ? new KvDisk(dir, 0) : null);
    }
    const disk = this.folder ?? undefined;
    if (disk) return disk.unremovedBy(() => erase(disk));
    erase();
    return [];
  }
}
