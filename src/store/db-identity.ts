import { accessSync, constants, statSync } from "node:fs";

/**
 * Which file the store opened, and whether it could write it then, so that a connection that no
 * longer serves the path is noticed (docs/agent.md, The store: "Removed while the core runs").
 * SQLite keeps writing to the file it has open: after `rm -rf` of the data folder, or a file put
 * where the folder was, every chat still answered ok and `sessions.list` still showed the
 * removed sessions, all of it in no file, gone at the next start. And it opens a file it cannot
 * write read-only, for good: a core started while local-ai.db was read-only failed every chat
 * until a restart, though the file was writable again.
 */
export class DbIdentity {
  private readonly dev: number;
  private readonly ino: number;
  private readonly readOnly: boolean;

  constructor(private readonly path: string) {
    const s = statSync(path);
    this.dev = s.dev;
    this.ino = s.ino;
    this.readOnly = !writable(path);
  }

  /** Why the connection should give way to a new one at the path (removed, replaced, writable again), or undefined. */
  stale(): string | undefined {
    try {
      const s = statSync(this.path);
      if (s.dev !== this.dev || s.ino !== this.ino) return "replaced";
    } catch (err) {
      return `removed (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`;
    }
    return this.readOnly && writable(this.path) ? "made writable (it was opened read-only)" : undefined;
  }
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
