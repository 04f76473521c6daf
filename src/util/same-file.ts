import { realpathSync } from "node:fs";
import * as nodePath from "node:path";
import type { PathRules } from "./full-path.ts";

/** The OS's path rules and node:fs's realpath calls; tests hand in Windows' on any OS. */
export interface PathReader {
  rules: PathRules;
  realpath: { (path: string): string; native(path: string): string };
}

const osPaths: PathReader = { rules: nodePath, realpath: realpathSync };

/**
 * Two absolute paths name one file, as the OS resolves both: through symlinks and, on Windows,
 * whatever 8.3 short name, subst drive, case, slashes or `\\?\` prefix either is spelled with.
 * The native realpath (GetFinalPathNameByHandle) answers the name on disk; the other keeps the
 * spelling given there (measured under Wine), so the record of a llama-server and the path its
 * process shows differed and the orphan was left running. Case is folded on Windows only, where
 * the names have none. Bare command names, and a path that is not there, compare as written.
 */
export function sameFile(a: string, b: string, os: PathReader = osPaths): boolean {
  if (a === b) return true;
  if (!os.rules.isAbsolute(a) || !os.rules.isAbsolute(b)) return false;
  try {
    const [ra, rb] = [os.realpath.native(a), os.realpath.native(b)];
    return os.rules.sep === "\\" ? foldCase(ra) === foldCase(rb) : ra === rb;
  } catch {
    return false;
  }
}

/**
 * `paths` with one entry per place, the first spelling kept: two spellings are one when the OS
 * resolves both to one (as sameFile does), or, for one not there, when they normalize to one
 * (`/` or `\\`, a trailing separator, `.` and `..`; case folded on Windows, so `C:` is `c:`).
 * `models` listed one folder twice when the config's folder and model.path's were spelled apart.
 */
export function distinctPaths(paths: readonly string[], os: PathReader = osPaths): string[] {
  const seen = new Set<string>();
  return paths.filter((path) => {
    const key = identityOf(path, os);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function identityOf(path: string, os: PathReader): string {
  let found: string;
  try {
    found = os.realpath.native(path);
  } catch {
    found = os.rules.resolve(path);
  }
  return os.rules.sep === "\\" ? foldCase(found) : found;
}

/** Upper case a character at a time, as NTFS's upcase table does: one that would grow (ß) is kept. */
function foldCase(path: string): string {
  return Array.from(path, (c) => (c.toUpperCase().length === c.length ? c.toUpperCase() : c)).join("");
}
