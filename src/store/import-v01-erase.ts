import { closeSync, existsSync, lstatSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";
import type { ChatMessage } from "../protocol/chat-message.ts";
import { CoreError } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import { openRegularFile } from "../util/read-file.ts";
import { writeFileAtomic } from "./atomic.ts";
import { CheckpointSchema } from "./checkpoint.ts";
import { fsProblemText } from "./data-dir-problem.ts";
import {
  HistorySchema,
  IMPORTED_DIR,
  isRealDir,
  MAX_V01_ERASE_BYTES,
  MAX_V01_FILE_BYTES,
  readJson,
  TurnsSchema,
} from "./import-v01.ts";
import { startsWithInput } from "./import-v01-memory.ts";
import { openToZeroChecked, zeroOpenSync } from "./scrub-file.ts";
import { removeZeroedSync } from "./scrub-tree.ts";

/** The user's 0.1 folders kept aside after an import (in `imported-0.1/users`, `users-<time>`). */
function keptTrees(dataDir: string, userId: string): string[] {
  const aside = join(dataDir, IMPORTED_DIR);
  if (!existsSync(aside)) return [];
  return readdirSync(aside)
    .filter((e) => e.startsWith("users"))
    .map((e) => folderNamed(join(aside, e), userId))
    .filter((t) => t !== undefined);
}

/**
 * `parent/name` when the folder holds an entry of exactly that name, a folder and not a link: ids
 * differ by case (`Ann`, `ann`), and macOS's and Windows' disks find `ann`'s folder by `Ann`, so
 * a delete of one user erased another's files. `parent` a link (a linked `users/`, moved aside as
 * it is): nothing was imported through it, and a delete removed the user's folder out there.
 */
function folderNamed(parent: string, name: string): string | undefined {
  if (!isRealDir(parent)) return undefined;
  try {
    if (!readdirSync(parent).includes(name)) return undefined;
    return lstatSync(join(parent, name)).isDirectory() ? join(parent, name) : undefined;
  } catch {
    return undefined;
  }
}

/** The session's folder in a user's tree, never through a link (import-v01.ts `isRealDir`: none was imported). */
function sessionFolder(tree: string, sessionId: string): string | undefined {
  return folderNamed(join(tree, "sessions"), sessionId);
}

/**
 * A write's temp file (store/atomic.ts, as 0.1 named its own) that a kill left beside a memory
 * file: a copy of the whole file, every session's entries, which the import never reads.
 */
const WRITE_TEMP = /^\.[0-9a-f]{12}\.tmp$/;

/**
 * Erases a user's (or one session's) text from the 0.1 files: the folders go, and the memory
 * files lose that session's entries (a stale temp file beside them naming it goes whole; a memory file that
 * cannot be read goes whole when it names the session, with a warning: the import could not read
 * it either; one in `users/` that cannot be rewritten fails the erase, as its other entries may
 * not be imported yet). A session's erase reads and rewrites each of the user's memory files whole (up to
 * 256 MiB each, import-v01.ts MAX_V01_ERASE_BYTES: about a second per 100 MB), so it runs on the store's thread
 * (Store.deleteSession), never on the main loop. `found`: tests, called with the user's folder
 * in `users/` before its erase.
 */
export function eraseImported(
  dataDir: string,
  userId: string,
  sessionId?: string,
  found?: (tree: string) => void,
): void {
  // In place first, then the kept trees, listed only after: another core finishing its import
  // moves `users/` aside meanwhile (import-v01.ts keepAside), and a tree listed before that move
  // was erased at a path it had left, its files kept whole.
  const live = folderNamed(join(dataDir, "users"), userId);
  if (live !== undefined) {
    found?.(live);
    eraseTree(live, sessionId, false);
  }
  for (const tree of keptTrees(dataDir, userId)) eraseTree(tree, sessionId, true);
}

/** `imported`: a tree kept aside, every readable file of it in the database (the marker is written). */
function eraseTree(tree: string, sessionId: string | undefined, imported: boolean): void {
  if (sessionId === undefined) {
    removeZeroedSync(tree);
    return;
  }
  // The memory files first: one that cannot be rewritten stops the erase before the session's folder goes.
  const memory = join(tree, "memory");
  if (isRealDir(memory)) {
    for (const name of readdirSync(memory)) {
      // A temp file is never imported: one naming the session goes whole, which needs no room
      // (rewritten, a full disk failed the delete for a copy whose loss costs nothing).
      if (WRITE_TEMP.test(name)) dropStaleTemp(join(memory, name), JSON.stringify(sessionId));
      else if (name.startsWith("turns.json")) dropSessionTurns(join(memory, name), sessionId, imported);
    }
  }
  const session = sessionFolder(tree, sessionId);
  if (session !== undefined) removeZeroedSync(session);
}

/**
 * An edit's (`replace_from`, `regenerate`) erase of the turns it replaces from the session's 0.1
 * files (docs/agent.md, Import of the 0.1 layout), as a delete's: on the store's thread, before the
 * edit's commit. `from.seq` is the edit's seq in the database, `from.base` the seq the import put
 * history.json's first message at (after any 1.0 turns of the session, import-v01-records.ts
 * recordBase), an interrupted turn's checkpoint the one after them (or the one it replaced from):
 * the history keeps the messages before `from.seq - from.base`, the checkpoint goes when its turn
 * is replaced, and the memory files lose the session's entries of the replaced turns, told by
 * their text as in the database (import-v01-memory.ts); all of them only for an edit from seq 0,
 * as there: from a 1.0 turn before the 0.1 ones, every 0.1 turn is replaced but not every entry.
 * Each file is written anew atomically, the history last (the replaced inputs are read from it),
 * so one stopped midway is done whole by the next edit of the session.
 * `read`: tests, called with each 0.1 file read whole.
 */
export function eraseImportedTail(
  dataDir: string,
  userId: string,
  sessionId: string,
  from: { seq: number; base: number; held: HeldPrefix },
  liveImported: boolean,
  read?: (path: string) => void,
): void {
  // The kept history counts from its first message; one edited from before it goes whole.
  const seq = Math.max(0, from.seq - from.base);
  const all = from.seq === 0;
  const { held } = from;
  // `users/` after an import that gave up: a session it had not reached is none of the edited
  // one's turns (a 1.0 session of the same id), and the next start imports its files whole.
  const live = liveImported ? folderNamed(join(dataDir, "users"), userId) : undefined;
  if (live !== undefined) eraseTail(live, { sessionId, seq, all, held, imported: false, read });
  for (const tree of keptTrees(dataDir, userId))
    eraseTail(tree, { sessionId, seq, all, held, imported: true, read });
}

/** How many of the history's first `upTo` messages the database still holds (import-v01-records.ts `heldPrefix`). */
export type HeldPrefix = (messages: readonly ChatMessage[], upTo: number) => number;

interface TailErase {
  sessionId: string;
  /** Where the kept history is cut. */
  seq: number;
  /** An edit from the session's first message: every one of its memory entries goes. */
  all: boolean;
  held: HeldPrefix;
  imported: boolean;
  read: ((path: string) => void) | undefined;
}

function eraseTail(tree: string, e: TailErase): void {
  const { sessionId } = e;
  const session = sessionFolder(tree, sessionId);
  if (session === undefined) return;
  const hPath = join(session, "history.json");
  // One the import could not read gave the session no seq: left as it is, the session's seqs then
  // its checkpoint's and 1.0's turns as with no history (the checkpoint was imported all the same).
  const read = readOr(hPath, (v) => HistorySchema.parse(v).messages, [], e.read) ?? [];
  // Past the import's cap: an older version's import when the database holds its first message,
  // else one this version skipped, kept as it was (none of its turns is in the session).
  const skipped = read.length > 0 && lstatSync(hPath).size > MAX_V01_FILE_BYTES && e.held(read, 1) === 0;
  const messages = skipped ? [] : read;
  // Messages the database no longer holds as imported (an older version's files) are replaced too.
  const upTo = Math.min(e.seq, messages.length);
  const heldTo = upTo > 0 ? e.held(messages, upTo) : 0;
  const seq = heldTo < upTo ? heldTo : e.seq;
  const inputs = new Set(messages.slice(seq).flatMap((m) => (m.role === "user" ? [m.content] : [])));
  const cPath = join(session, "checkpoint.json");
  const cp = readOr(cPath, (v) => CheckpointSchema.parse(v), undefined, e.read);
  const cpReplaced = cp !== undefined && seq <= (cp.replace_from_seq ?? messages.length);
  if (cpReplaced) inputs.add(cp.user_input);
  // From the first message every turn is replaced: all of the session's entries go. Past the 0.1
  // turns (a 1.0 answer regenerated after them, say) none is: the memory files, every session's
  // entries and up to 256 MiB each, are not read, as the edit's commit waits on this.
  if (e.all || inputs.size > 0) eraseTailMemory(join(tree, "memory"), e, e.all ? undefined : inputs);
  // A 0.1 write's temp file a kill left (0.1 removed it at the session's next turn): a copy of the
  // history or the checkpoint, never imported, holding the replaced turns.
  if (seq < messages.length || cpReplaced)
    for (const e of readdirSync(session, { withFileTypes: true }))
      if (WRITE_TEMP.test(e.name) && !e.isDirectory()) removeZeroedSync(join(session, e.name));
  if (cpReplaced) removeZeroedSync(cPath);
  if (seq < messages.length)
    rewrite(hPath, { version: 1, messages: messages.slice(0, seq) }, e.imported, "edit");
}

/** `parse` of the JSON at `path`; `absent` when there is none; undefined when it cannot be read or is of another shape. */
function readOr<T, A>(
  path: string,
  parse: (value: unknown) => T,
  absent: A,
  read?: (path: string) => void,
): T | A | undefined {
  if (!existsSync(path)) return absent;
  read?.(path);
  try {
    return parse(readJson(path, MAX_V01_ERASE_BYTES));
  } catch {
    return undefined;
  }
}

function eraseTailMemory(memory: string, e: TailErase, inputs: ReadonlySet<string> | undefined): void {
  if (!isRealDir(memory)) return;
  for (const name of readdirSync(memory)) {
    if (WRITE_TEMP.test(name)) dropStaleTemp(join(memory, name), JSON.stringify(e.sessionId));
    else if (name.startsWith("turns.json")) dropReplacedTurns(join(memory, name), e, inputs);
  }
}

/** The session's entries whose text starts with one of `inputs` and a newline (all of them: undefined) dropped. */
function dropReplacedTurns(path: string, e: TailErase, inputs: ReadonlySet<string> | undefined): void {
  const { sessionId } = e;
  // One that cannot be read was not imported: its entries were never recalled, and are left (docs/agent.md).
  const turns = readOr(path, (v) => TurnsSchema.parse(v).turns, undefined, e.read);
  if (turns === undefined) return;
  const replaced = (t: unknown): boolean => {
    const e = t as { session_id?: unknown; text?: unknown } | null;
    if (e?.session_id !== sessionId) return false;
    return inputs === undefined || (typeof e.text === "string" && startsWithInput(e.text, inputs));
  };
  const kept = turns.filter((t) => !replaced(t));
  if (kept.length < turns.length) rewrite(path, { version: 1, turns: kept }, e.imported, "edit");
}

function dropSessionTurns(path: string, sessionId: string, imported: boolean): void {
  const needle = JSON.stringify(sessionId);
  let value: unknown;
  try {
    value = readJson(path, MAX_V01_ERASE_BYTES);
  } catch {
    // Unparseable or too large to read whole.
    if (mentions(path, needle)) removeUnimported(path);
    return;
  }
  const file = TurnsSchema.safeParse(value);
  if (!file.success) {
    // JSON of another shape: the import skipped it as it does an unparseable one.
    if (JSON.stringify(value).includes(needle)) removeUnimported(path);
    return;
  }
  const kept = file.data.turns.filter((t) => (t as { session_id?: unknown })?.session_id !== sessionId);
  if (kept.length < file.data.turns.length) rewrite(path, { version: 1, turns: kept }, imported, "delete");
}

/**
 * A 0.1 file written anew without what an erase takes. In users/ its other entries may be there
 * only (an import that gave up before its unit, on a full disk, say): kept, and the erase fails,
 * to be sent again. In a tree kept aside everything it holds was read and imported: it goes whole.
 */
function rewrite(path: string, value: unknown, imported: boolean, what: "delete" | "edit"): void {
  // Opened before the rename: the old file's blocks keep the erased turns once the new one is in place.
  const old = openToZeroChecked(path);
  // Another file renamed onto the name after each open (another writer's save): renamed over
  // unchecked, it went unzeroed. Left as it is; the erase fails, to be sent again.
  if (old === "changed") throw notRewritten(path, { code: "ECHANGED" }, what);
  try {
    try {
      writeFileAtomic(path, JSON.stringify(value));
    } catch (err) {
      if (!imported) throw notRewritten(path, err, what);
      removeZeroedSync(path);
      return;
    }
    if (old !== undefined) zeroReplaced(old, path);
    else logger.warn(`the replaced 0.1 file ${path} was not zeroed: it could not be opened for writing`);
  } finally {
    if (old !== undefined) closeSync(old);
  }
}

/** Best effort, as SQLite's `secure_delete` is: the new file is in place whatever this does. */
function zeroReplaced(fd: number, path: string): void {
  try {
    zeroOpenSync(fd);
  } catch (err) {
    logger.warn(`the replaced 0.1 file ${path} could not be zeroed: ${(err as Error).message}`);
  }
}

function notRewritten(path: string, err: unknown, what: "delete" | "edit"): CoreError {
  const code = (err as { code?: string }).code;
  return new CoreError(
    "internal_error",
    `the 0.1 file ${path} could not be rewritten without the erased turns (${fsProblemText(code)}); the ${what} stopped before the session's rows were erased: send it again once that is fixed`,
    { key: "app.data_dir", path, problem: code ?? "unknown" },
  );
}

/**
 * A memory file the import could not read either goes whole when it names the session: other
 * sessions' entries, kept only there, go with it (logged), as the session's words must not
 * outlive its delete.
 */
function removeUnimported(path: string): void {
  removeZeroedSync(path);
  logger.warn(`a 0.1 memory file that could not be read was removed whole to erase a session: ${path}`);
}

function dropStaleTemp(path: string, needle: string): void {
  if (mentions(path, needle)) removeZeroedSync(path);
}

/** Bytes read at a time when a file is looked through for a name. */
const SCAN_BYTES = 1024 * 1024;

/** Whether a regular file's bytes hold `needle` (ASCII: a safe id, quoted), read a window at a time. */
function mentions(path: string, needle: string): boolean {
  let fd: number;
  try {
    fd = openRegularFile(path, { follow: false }).fd;
  } catch {
    return false; // a FIFO, a device or a link in its place is never waited on or followed; one unreadable cannot be told
  }
  try {
    const buffer = Buffer.alloc(SCAN_BYTES + needle.length);
    // Bytes carried at the buffer's start from the read before: a name across two reads is found.
    let kept = 0;
    for (let at = 0; ; ) {
      const n = readSync(fd, buffer, kept, SCAN_BYTES, at);
      if (n === 0) return false;
      const end = kept + n;
      if (buffer.subarray(0, end).includes(needle, 0, "latin1")) return true;
      at += n;
      const carry = Math.min(needle.length - 1, end);
      buffer.copy(buffer, 0, end - carry, end);
      kept = carry;
    }
  } finally {
    closeSync(fd);
  }
}
