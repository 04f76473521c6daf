import * as nodePath from "node:path";

/** The OS's path rules: path.win32 or path.posix (tests hand one in). */
export type PathRules = typeof nodePath.win32;

/**
 * Whether `path` names one place whatever the core's working folder: absolute, and on Windows
 * with its drive or share. path.win32 calls `\data` absolute, yet it is on the drive of the
 * working folder, which the host does not choose.
 */
export function isFullPath(path: string, rules: PathRules = nodePath): boolean {
  return rules.isAbsolute(path) && !(rules.sep === "\\" && /^[\\/](?![\\/])/.test(path));
}
