import { statSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { CoreError } from "../protocol/errors.ts";

/**
 * Why the data directory cannot be used, in words a person acts on. A chat that cannot write
 * under app.data_dir is not a bug in the core: the host gets the path and the problem instead
 * of "see the core's log" (doctor's data_dir check says the same before any chat).
 */

const PROBLEMS: Record<string, string> = {
  ENOTDIR: "not a folder",
  EEXIST: "not a folder",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "on a read-only file system",
  ENOSPC: "no space left on the disk",
  EDQUOT: "the disk quota is used up",
  ENAMETOOLONG: "the path is too long",
  ELOOP: "too many levels of symbolic links",
  EISDIR: "a folder where a file was expected",
  // Not the system's: store/scrub-file.ts, a name another program kept renaming a file onto.
  ECHANGED: "replaced by another file each time it was opened",
  // Not thrown by the system here: store/scrub-tree.ts, a name listed with U+FFFD for its bytes.
  // store/scrub-tree.ts: a folder an erase emptied twice, files put in it again each time.
  ENOTEMPTY: "a folder still not empty (files kept being put in it: close the program writing there)",
  EILSEQ: "holds a name in bytes that are not UTF-8, which the core cannot reach: remove it by hand",
};

/** A filesystem error code in words, with the code kept for searching: "permission denied (EACCES)". */
export function fsProblemText(code: string | undefined): string {
  if (!code) return "unknown problem";
  return PROBLEMS[code] ? `${PROBLEMS[code]} (${code})` : code;
}

/** The nearest existing ancestor of `path` (or path itself) when it is a file, not a folder. */
export function fileInTheWay(path: string): string | undefined {
  let p = resolve(path);
  for (;;) {
    try {
      return statSync(p).isDirectory() ? undefined : p;
    } catch {
      const up = dirname(p);
      if (up === p) return undefined;
      p = up;
    }
  }
}

/**
 * The error a filesystem failure under `dataDir` becomes: internal_error (docs/protocol.md#errors
 * has no closer code) whose message names the folder and the problem, and whose data carries `key`
 * app.data_dir, `path` (the data directory), `file` (what failed) and `problem` (the errno code).
 * Undefined for anything else, which stays unexpected.
 */
export function dataDirError(err: unknown, dataDir: string): CoreError | undefined {
  const e = err as NodeJS.ErrnoException | undefined;
  if (!e || typeof e.code !== "string" || typeof e.path !== "string") return undefined;
  const inside = relative(resolve(dataDir), resolve(e.path));
  if (inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside)) return undefined;
  const blocker = e.code === "ENOTDIR" || e.code === "EEXIST" ? fileInTheWay(e.path) : undefined;
  const detail = blocker ? `${blocker} is a file, not a folder` : `${e.path}: ${fsProblemText(e.code)}`;
  // The folder is right where the disk has no room: moving it is not the first thing to do.
  const fix =
    e.code === "ENOSPC" || e.code === "EDQUOT"
      ? "free some disk space there"
      : "set app.data_dir to a folder this user can write";
  return new CoreError(
    "internal_error",
    `the data directory ${dataDir} (app.data_dir) cannot be used: ${detail}; ${fix}`,
    { key: "app.data_dir", path: dataDir, file: e.path, problem: e.code },
  );
}
