import { statSync } from "node:fs";

/**
 * Which file the store opened, so that a database removed or replaced under a running core is
 * noticed (docs/agent.md, The store: "Removed while the core runs"). SQLite keeps writing to the
 * file it has open: after `rm -rf` of the data folder, or a file put where the folder was, every
 * chat still answered ok and `sessions.list` still showed the removed sessions, all of it in no
 * file, gone at the next start.
 */
export class DbIdentity {
  private readonly dev: number;
  private readonly ino: number;

  constructor(private readonly path: string) {
    const s = statSync(path);
    this.dev = s.dev;
    this.ino = s.ino;
  }

  /** Why the file at the path is no longer the one opened (`ENOENT`, `ENOTDIR`, `replaced`…), or undefined. */
  lost(): string | undefined {
    try {
      const s = statSync(this.path);
      return s.dev === this.dev && s.ino === this.ino ? undefined : "replaced";
    } catch (err) {
      return (err as NodeJS.ErrnoException).code ?? "unreadable";
    }
  }
}
