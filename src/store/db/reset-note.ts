import { existsSync, lstatSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { writePrivateFile } from "../../util/private-fs.ts";
import { readSmallFile } from "../../util/read-file.ts";

/** What a database set aside is named after (`local-ai.db.corrupt-<time>`); users.delete reaches these too. */
export const ASIDE_INFIX = ".corrupt-";

/**
 * A file beside the database saying a damaged one was moved aside, written before the move and
 * removed once a chat told the host (the `store_reset` warning, Store.takeResets): a core stopped
 * between the move and that (the migration's thread ended by shutdown, a kill) left a fresh file
 * and no word of the reset, and the next start told the host nothing (docs/agent.md, The store).
 */
export const resetNote = (path: string) => `${path}.reset`;

/** Holds a few resets' paths and SQLite messages. */
const NOTE_BYTES = 64 * 1024;
/** The most resets a note keeps untold: a file damaged at every start does not grow it without end. */
const NOTE_RESETS = 8;

export type PendingReset = { aside: string; problem: string };

/**
 * Best effort: a note that cannot be written leaves the reset as it was, told by this process only.
 * Added to the resets the note holds untold: a second reset before a chat told the first (the
 * fresh file damaged too, a core stopped twice before a chat) lost the first copy's warning.
 */
export function writeResetNote(path: string, reset: PendingReset): void {
  try {
    const resets = [...pendingResets(path).filter((r) => r.aside !== reset.aside), reset];
    // Over the limit, the first is kept with the latest: the first copy holds the conversations,
    // the later ones are fresh files damaged again (a failing disk), each telling less.
    const kept = resets.length > NOTE_RESETS ? [resets[0], ...resets.slice(1 - NOTE_RESETS)] : resets;
    writePrivateFile(resetNote(path), JSON.stringify(kept));
  } catch {}
}

export function clearResetNote(path: string): void {
  try {
    rmSync(resetNote(path), { force: true });
  } catch {}
}

/** The latest reset the note tells of, not yet told to the host (`pendingResets`). */
export function pendingReset(path: string): PendingReset | undefined {
  return pendingResets(path).at(-1);
}

/**
 * The resets a note tells of, not yet told to the host, oldest first; one whose file set aside is
 * not there (the move never happened: a core killed before it, or the copy erased since) is not,
 * and a note with none left goes. A note an older version wrote holds one reset, not a list.
 */
export function pendingResets(path: string): PendingReset[] {
  const note = resetNote(path);
  if (!existsSync(note)) return [];
  let resets: PendingReset[] = [];
  try {
    const read = JSON.parse(readSmallFile(note, NOTE_BYTES, { follow: false })) as unknown;
    resets = (Array.isArray(read) ? read : [read]).flatMap((r) => kept(path, r));
  } catch {}
  if (resets.length === 0) clearResetNote(path);
  return resets;
}

/** Every reset not yet told, the open's own (`resetFrom`) last where the note lacks it: each its own store_reset warning. */
export function untoldResets(path: string, resetFrom?: string, problem?: string): PendingReset[] {
  const resets = pendingResets(path);
  if (resetFrom && !resets.some((r) => r.aside === resetFrom))
    resets.push({ aside: resetFrom, problem: problem ?? "" });
  return resets;
}

function kept(path: string, reset: unknown): PendingReset[] {
  const { aside, problem } = (reset ?? {}) as Partial<PendingReset>;
  if (typeof aside !== "string" || typeof problem !== "string") return [];
  const own = ownCopy(path, aside);
  try {
    return own !== undefined && lstatSync(own).isFile() ? [{ aside: own, problem }] : [];
  } catch {
    return [];
  }
}

/**
 * A copy the core set aside beside this database (open.ts names it `<db>.corrupt-<time>`), never
 * its log: a note naming any other file (a data_dir copied from elsewhere, a note planted there)
 * had the host told that file's path as where its conversations were kept. The folder is compared
 * by identity, not spelling: a data_dir given through a link, with a trailing slash or relative
 * at the next start dropped a note never told. The copy is named as the folder is spelled now.
 */
function ownCopy(path: string, aside: string): string | undefined {
  const name = basename(aside);
  if (!name.startsWith(`${basename(path)}${ASIDE_INFIX}`) || /-(wal|shm|journal)$/.test(name))
    return undefined;
  try {
    const was = statSync(dirname(aside));
    const now = statSync(dirname(path));
    return was.dev === now.dev && was.ino === now.ino ? join(dirname(path), name) : undefined;
  } catch {
    return undefined;
  }
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
