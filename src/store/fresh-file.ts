import { constants } from "node:fs";
import { join } from "node:path";
import { openPrivateFile } from "../util/private-fs.ts";

/** How many fresh names are tried before a folder whose names keep being taken is given up on. */
export const FRESH_NAME_TRIES = 8;

/** The create of a temp file: owner-only, never through a link, failing on a name that exists. */
export const createPrivate = (path: string): number =>
  openPrivateFile(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL);

/**
 * A file created at a fresh name in `dir`, its descriptor and path. A name found taken (EEXIST,
 * or ELOOP: a link there) is another's file, another core's temp or a link someone planted, never
 * the core's to zero or remove: the next name `name` gives is tried, up to `tries` in all, then
 * that error is thrown. An open that throws created nothing, so its caller removes nothing.
 * `create`: the open (a caller notes the name first; tests inject a failing one).
 */
export function openFresh(
  dir: string,
  name: () => string,
  create: (path: string) => number = createPrivate,
  tries = FRESH_NAME_TRIES,
): { fd: number; path: string } {
  for (let tried = 1; ; tried++) {
    const path = join(dir, name());
    try {
      return { fd: create(path), path };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (tried >= tries || (code !== "EEXIST" && code !== "ELOOP")) throw err;
    }
  }
}
