import { join, sep } from "node:path";

/**
 * A leading `~` (alone, or before a path separator) as the user's home folder, as a shell and
 * huggingface_hub's `expanduser` read it; `~user` and a `~` further in are left as they are.
 * `~\` only where `\` separates (Windows): on POSIX it is part of a name. Pure: the caller
 * passes the home folder.
 */
export function expandHome(path: string, home: string): string {
  if (path === "~") return home;
  if (path.startsWith("~/") || (sep === "\\" && path.startsWith("~\\"))) return join(home, path.slice(2));
  return path;
}
