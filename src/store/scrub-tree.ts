import { type Dirent, lstatSync, readdirSync, rmdirSync, type Stats, unlinkSync } from "node:fs";
import { join } from "node:path";
import { logger } from "../util/logger.ts";
import { zeroFileSync } from "./scrub-file.ts";

/** Passes over a folder that files keep being put in, before it is left and the erase fails. */
const PASSES = 2;

/**
 * Removes a file or a folder of a conversation's words, each regular file in it zeroed and synced
 * first (scrub-file.ts: unlinked alone, its blocks keep the words; docs/agent.md, The store). Links
 * are removed, never followed. The zeroing is best effort, as SQLite's `secure_delete` is: a file
 * it cannot open for writing (read-only, another user's) is still removed, with a warning, since
 * an erase that kept the name would keep the words readable too. Entry by entry, each file as it
 * was zeroed: a file put in a folder after its zeroing pass (the 0.1 app writing on) went unzeroed
 * with one recursive removal. For the store's thread: synchronous.
 */
export function removeZeroedSync(path: string): void {
  let stats: Stats;
  try {
    stats = lstatSync(path);
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return;
    throw err;
  }
  // Not a folder (a link to one is never listed through: its target is anyone's): the file itself.
  if (!stats.isDirectory()) {
    removeFile(path, stats.isFile());
    return;
  }
  let entries: Dirent[];
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch (err) {
    // Not listed, nothing in it can be zeroed: removed whole, what it held went unzeroed. Left,
    // and the erase fails naming it (import-v01-run.ts), to be sent again once it can be listed.
    if ((err as { code?: string }).code === "ENOENT") return;
    throw err;
  }
  removeFolder(path, entries);
}

/** `path`'s entries removed, each file zeroed first, then the folder; a newcomer taken in a next pass. */
function removeFolder(path: string, listed: Dirent[]): void {
  let entries = listed;
  for (let pass = 1; ; pass++) {
    refuseUnreachable(path, entries);
    for (const e of entries) {
      const at = join(path, e.name);
      // The entry's own type (readdir does not follow a link): a linked folder is never entered.
      if (e.isDirectory()) removeZeroedSync(at);
      else removeFile(at, e.isFile());
    }
    try {
      rmdirSync(path);
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === "ENOENT") return;
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
      // Left with the newcomers' words in it: the erase fails naming the folder, as one that
      // cannot be listed does, to be sent again once nothing writes there (the 0.1 app closed).
      if (pass >= PASSES)
        throw Object.assign(new Error(`${path} was left: files kept being put in it while it was erased`), {
          code: "ENOTEMPTY",
          path,
        });
    }
    try {
      entries = readdirSync(path, { withFileTypes: true });
    } catch (err) {
      // Removed meanwhile by the program that wrote in it: nothing left, not a failed erase.
      if ((err as { code?: string }).code === "ENOENT") return;
      throw err;
    }
  }
}

/**
 * A name whose bytes are not UTF-8 (0.1 on Linux took names as they came) is listed with U+FFFD
 * in their place, a name no call finds: passed over as gone, its file kept its words and the
 * folder was left as if files kept coming, the erase answered done. It fails instead, naming the
 * folder (doctor's v01_data names such folders too).
 */
function refuseUnreachable(path: string, entries: Dirent[]): void {
  // A real U+FFFD in a UTF-8 name is found at its name.
  if (
    entries.some(
      (e) => e.name.includes("\uFFFD") && !lstatSync(join(path, e.name), { throwIfNoEntry: false }),
    )
  )
    throw Object.assign(
      new Error(`${path} holds a file whose name is not UTF-8, which the core cannot reach`),
      {
        code: "EILSEQ",
        path,
      },
    );
}

function removeFile(path: string, regular: boolean): void {
  if (regular) zeroOne(path);
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOENT") throw err;
  }
}

function zeroOne(path: string): void {
  try {
    zeroFileSync(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    // Another file renamed onto the name after each open (the 0.1 app, another core): unlinked
    // unchecked, the one there last went unzeroed. Left, and the erase fails, to be sent again.
    if (code === "ECHANGED") throw err;
    if (code !== "ENOENT" && code !== "ELOOP")
      logger.warn(
        `${path} could not be zeroed before its removal (${code ?? (err as Error).message}): removed all the same`,
      );
  }
}
