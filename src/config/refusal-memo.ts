import { statSync } from "node:fs";
import { CoreError } from "../protocol/errors.ts";

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
      if (before !== undefined && ofTheText(err) && identity(file) === before)
        this.refused = { file: before, err };
      throw err;
    }
  }
}

/**
 * A refusal the file's text earned: it names a line or a key. A failed read names neither, and
 * may be the process's or the moment's (too many open files, EIO, a scanner's lock on Windows):
 * kept, it refused a sound file until someone touched it. Such a read fails fast anyway.
 */
function ofTheText(err: unknown): boolean {
  if (!(err instanceof CoreError)) return false;
  const data = err.data as { line?: unknown; key?: unknown } | undefined;
  return (data?.line ?? null) !== null || (data?.key ?? null) !== null;
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
