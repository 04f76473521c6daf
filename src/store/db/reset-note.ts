import { existsSync, lstatSync, rmSync } from "node:fs";
import { basename, dirname } from "node:path";
import { writePrivateFile } from "../../util/private-fs.ts";
import { readSmallFile } from "../../util/read-file.ts";

/** What a database set aside is named after (`local-ai.db.corrupt-<time>`); users.delete reaches these too. */
export const ASIDE_INFIX = ".corrupt-";

/**
 * A file beside the database saying a damaged one was moved aside, written before the move and
 * removed once a chat told the host (the `store_reset` warning, Store.takeReset): a core stopped
 * between the move and that (the migration's thread ended by shutdown, a kill) left a fresh file
 * and no word of the reset, and the next start told the host nothing (docs/agent.md, The store).
 */
export const resetNote = (path: string) => `${path}.reset`;

/** Holds two paths and one SQLite message. */
const NOTE_BYTES = 64 * 1024;

export type PendingReset = { aside: string; problem: string };

/** Best effort: a note that cannot be written leaves the reset as it was, told by this process only. */
export function writeResetNote(path: string, reset: PendingReset): void {
  try {
    writePrivateFile(resetNote(path), JSON.stringify(reset));
  } catch {}
}

export function clearResetNote(path: string): void {
  try {
    rmSync(resetNote(path), { force: true });
  } catch {}
}

/**
 * The reset a note tells of, not yet told to the host; none when its file set aside is not there
 * (the move never happened: a core killed before it, or the copy erased since), and the note goes.
 */
export function pendingReset(path: string): PendingReset | undefined {
  const note = resetNote(path);
  if (!existsSync(note)) return undefined;
  try {
    const { aside, problem } = JSON.parse(readSmallFile(note, NOTE_BYTES, { follow: false })) as PendingReset;
    if (
      typeof aside === "string" &&
      typeof problem === "string" &&
      ownCopy(path, aside) &&
      lstatSync(aside).isFile()
    ) {
      return { aside, problem };
    }
  } catch {}
  clearResetNote(path);
  return undefined;
}

/**
 * A copy the core set aside beside this database (open.ts names it `<db>.corrupt-<time>`), never
 * its log: a note naming any other file (a data_dir copied from elsewhere, a note planted there)
 * had the host told that file's path as where its conversations were kept.
 */
function ownCopy(path: string, aside: string): boolean {
  const name = basename(aside);
  return (
    dirname(aside) === dirname(path) &&
    name.startsWith(`${basename(path)}${ASIDE_INFIX}`) &&
    !/-(wal|shm|journal)$/.test(name)
  );
}

/**
 * The reset as a chat tells it: its copy removed since (users.delete removes a damaged one whole,
 * erase-copies.ts) is said to be gone, never named as where the conversations are kept.
 */
export function asTold<R extends PendingReset>(reset: R): R & { removed?: true } {
  try {
    if (lstatSync(reset.aside).isFile()) return reset;
  } catch {}
  return { ...reset, removed: true };
}

/** The chat's `store_reset` warning: the kept copy named, or said erased since (asTold). */
export function resetMessage(reset: PendingReset & { removed?: true }): string {
  const where = reset.removed ? ", that copy has since been erased," : ` to ${reset.aside}`;
  return `the conversation database could not be used (${reset.problem}); it was moved aside${where} and a fresh one started`;
}
