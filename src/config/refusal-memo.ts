import { statSync } from "node:fs";

/**
 * A config load's last refusal, kept with the file it refused. The core tries the file again at
 * each request that needs it (docs/protocol.md, "Start-up"), so a host can fix it without a
 * restart; but reading and parsing it again takes the event loop up to seconds for a large one
 * (1 MiB of flow lists: about 2 s), and a host sending requests against a broken config held
 * ping and cancel that long for each. While the file is the one refused the refusal is thrown
 * again without reading it: the change time is compared too, so a chmod that makes an
 * unreadable file readable counts as a change.
 */
export class RefusalMemo {
  private refused: { file: string; err: unknown } | undefined;

  /** `load()`'s result, or its error; `file` is what it reads. */
  run<T>(file: string, load: () => T): T {
    const before = identity(file);
    if (this.refused && before !== undefined && this.refused.file === before) throw this.refused.err;
    this.refused = undefined;
    try {
      return load();
    } catch (err) {
      // Only a file that stayed put while it was read is remembered (a missing one costs a stat).
      if (before !== undefined && identity(file) === before) this.refused = { file: before, err };
      throw err;
    }
  }
}

/** The file as the file system knows it now, links followed; undefined when there is none. */
function identity(path: string): string | undefined {
  try {
    const st = statSync(path);
    return [path, st.dev, st.ino, st.size, st.mtimeMs, st.ctimeMs, st.mode].join(":");
  } catch {
    return undefined;
  }
}
