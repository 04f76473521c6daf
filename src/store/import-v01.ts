import type { Database } from "bun:sqlite";
import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ChatMessage } from "../protocol/chat-message.ts";
import { SafeIdSchema } from "../protocol/safe-id.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateDir, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../util/private-fs.ts";
import { openRegularFile } from "../util/read-file.ts";
import { type Checkpoint, CheckpointSchema, JsonArraySchema, MessagesSchema } from "./checkpoint.ts";
import { Conversations } from "./conversations.ts";
import { wasWriteAgain } from "./earlier-requests.ts";
import { erasedSince, erasureMark } from "./erasures.ts";
import { recordBase, UNIT_PREFIX, unitKey } from "./import-v01-records.ts";
import { NEW_MEMORY_ID } from "./memory-ids.ts";

/**
 * The 0.1 layout (one folder per session under `users/`,
 * docs/agent.md#the-store-one-sqlite-database-srcstore, "Import of the 0.1 layout"): read into
 * the database one unit at a time (a session's files, a user's memory file), each unit in a
 * transaction of its own that also records it done (a killed import goes on where it stopped and
 * imports nothing twice), the marker written last; then the folder is moved to `imported-0.1/`,
 * kept, never deleted — except what `sessions.delete` and `users.delete` erase
 * (import-v01-erase.ts). Run on the store's thread (import-v01-run.ts drives it).
 */
export const IMPORTED_DIR = "imported-0.1";
const MARKER = "import_v01";

export const HistorySchema = z.object({ version: z.literal(1), messages: MessagesSchema });
const TurnSchema = z.object({ id: z.string(), session_id: SafeIdSchema, text: z.string(), at: z.string() });
export const TurnsSchema = z.object({ version: z.literal(1), turns: JsonArraySchema });
/**
 * A user or session folder the protocol can name (protocol/safe-id.ts): one it cannot (a Windows
 * device name, which 0.1 let through) would be imported as rows no method could read or erase.
 */
const isSafeId = (name: string): boolean => SafeIdSchema.safeParse(name).success;

export interface ImportReport {
  sessions: number;
  checkpoints: number;
  memory: number;
  skipped: string[];
}

/** One session's folder, or (no session) the user's memory file. */
export interface V01Unit {
  user: string;
  session?: string;
}

export const emptyReport = (): ImportReport => ({ sessions: 0, checkpoints: 0, memory: 0, skipped: [] });

const marked = (db: Database): boolean => db.query("SELECT 1 FROM meta WHERE key = ?").get(MARKER) !== null;

/** Whether the session's 0.1 folder is in the database: the import finished, or reached its unit. */
export const sessionImported = (db: Database, work: { userId: string; sessionId: string }): boolean =>
  marked(db) ||
  db.query("SELECT 1 FROM meta WHERE key = ?").get(unitKey(work.userId, work.sessionId)) !== null;

/**
 * Whether an import is to run: no marker and a `users/` folder. With neither, the marker is
 * written now (a database imported before takes no write lock at open: another core may hold it).
 */
export function importNeeded(db: Database, dataDir: string, now: Date): boolean {
  if (marked(db)) return false;
  if (existsSync(join(dataDir, "users"))) return true;
  db.transaction(() => {
    if (!marked(db)) db.query("INSERT INTO meta (key, value) VALUES (?, ?)").run(MARKER, now.toISOString());
  }).immediate();
  return false;
}

/** The units under `users/`, in a stable order, and the newest erase before them (erasures.ts). */
export function listUnits(db: Database, dataDir: string): { units: V01Unit[]; mark: number } {
  const users = join(dataDir, "users");
  const units: V01Unit[] = [];
  for (const user of safeEntries(users)) {
    const sessions = join(users, user, "sessions");
    for (const session of safeEntries(sessions)) units.push({ user, session });
    const memory = join(users, user, "memory");
    if (isRealDir(memory) && existsSync(join(memory, "turns.json"))) units.push({ user });
  }
  return { units, mark: erasureMark(db) };
}

/**
 * A folder, not a link to one: 0.1 made none, and one pointing out of its folder had the import
 * read text from elsewhere into a user's rows, and their erase then remove or rewrite it there.
 */
export function isRealDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The folders in `dir` (itself not a link) the protocol can name, links left out. */
function safeEntries(dir: string): string[] {
  if (!isRealDir(dir)) return [];
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() && isSafeId(e.name))
      .map((e) => e.name)
      .sort();
  } catch {
    return [];
  }
}

/**
 * Past this a 0.1 file is not read, by the import nor an erase: it is parsed whole in the core's
 * own process, and JSON of many small values costs far more than its bytes (64 MiB of `{},`:
 * ~1.9 GB; small real messages ~14x). Left as it is (docs/agent.md); 0.1 histories come nowhere near.
 */
export const MAX_V01_FILE_BYTES = 32 * 2 ** 20;

/**
 * The largest 0.1 file a version imported (256 MiB before the cap above): its copy kept in
 * `imported-0.1/` holds turns the database has, so an erase reads one up to this, or an edit's
 * words outlived it there (import-v01-erase.ts).
 */
export const MAX_V01_ERASE_BYTES = 256 * 2 ** 20;

/** A file past the cap: its size is all that is read, and the import names why it skipped it. */
class TooLarge extends Error {}

/** A 0.1 file's JSON; a FIFO, a link or anything but a regular file in its place is refused, never waited on. */
export function readJson(path: string, maxBytes = MAX_V01_FILE_BYTES): unknown {
  const { fd, size } = openRegularFile(path, { follow: false });
  try {
    if (size > maxBytes) throw new TooLarge(`over ${maxBytes} bytes`);
    const buffer = Buffer.alloc(size);
    let at = 0;
    while (at < size) {
      const n = readSync(fd, buffer, at, size - at, at);
      if (n === 0) break;
      at += n;
    }
    return JSON.parse(buffer.subarray(0, at).toString("utf8"));
  } finally {
    closeSync(fd);
  }
}

/**
 * One unit: its files read and parsed first (no lock held), then written in one transaction
 * with its record, unless the marker or the record is there already (a run before this one,
 * another core) — or, for a session, an erase of it came after `mark` (another core's delete).
 */
export function importUnit(
  db: Database,
  dataDir: string,
  work: { unit: V01Unit; mark: number; at: number; maxBytes?: number },
  conv = new Conversations(db),
): ImportReport | "done" {
  const { unit, mark } = work;
  const key = unitKey(unit.user, unit.session);
  const done = () => db.query("SELECT 1 FROM meta WHERE key = ?").get(key) !== null;
  if (marked(db)) return "done";
  const r = emptyReport();
  if (done()) return r;
  const dir = join(dataDir, "users", unit.user);
  const max = work.maxBytes ?? MAX_V01_FILE_BYTES;
  const write =
    unit.session === undefined
      ? readMemory(dir, unit.user, r, max)
      : readSession(join(dir, "sessions", unit.session), unit.user, unit.session, r, max);
  return db
    .transaction((): ImportReport | "done" => {
      if (marked(db)) return "done";
      if (done()) return emptyReport();
      const erased = (session: string) => erasedSince(db, unit.user, session, mark);
      // Erased since (the session; for a memory file, its user): nothing written, no record naming it.
      if (erased(unit.session ?? "")) return emptyReport();
      write(conv, db, erased);
      db.query("INSERT INTO meta (key, value) VALUES (?, ?)").run(key, new Date(work.at).toISOString());
      return r;
    })
    .immediate();
}

/** Writes what was read, in the unit's transaction; `erased`: a session erased since the import began. */
type UnitWrite = (conv: Conversations, db: Database, erased: (session: string) => boolean) => void;

/** Reads one 0.1 file that exists; one that cannot be used is reported, not imported. */
function readFile<T>(path: string, label: string, r: ImportReport, read: () => T): T | undefined {
  if (!existsSync(path)) return undefined;
  try {
    return read();
  } catch (err) {
    r.skipped.push(err instanceof TooLarge ? `${label} (${err.message})` : label);
    return undefined;
  }
}

function readSession(dir: string, user: string, session: string, r: ImportReport, max: number): UnitWrite {
  const label = `users/${user}/sessions/${session}`;
  const hPath = join(dir, "history.json");
  const history = readFile(hPath, `${label}/history.json`, r, () => ({
    messages: HistorySchema.parse(readJson(hPath, max)).messages,
    at: statSync(hPath).mtime,
  }));
  const cPath = join(dir, "checkpoint.json");
  const checkpoint = readFile(cPath, `${label}/checkpoint.json`, r, () => {
    const read: Checkpoint = CheckpointSchema.parse(readJson(cPath, max));
    const cp = { ...read, turn: read.turn.map(asV01) };
    return { cp, at: new Date(Date.parse(cp.updated_at) || statSync(cPath).mtimeMs) };
  });
  return (conv, db) => {
    const base = history || checkpoint ? recordBase(db, user, session) : 0;
    // An interrupted 1.0 turn of the session (a chat while an import that gave up had not reached
    // it): the commit below drops a checkpoint, and that turn, its input and all, was lost.
    const held = heldCheckpoint(db, user, session);
    if (history && history.messages.length > 0) {
      const messages = history.messages.map((m, i) =>
        isRequest(history.messages, i) ? { ...asV01(m), by_core: true as const } : asV01(m),
      );
      // 0.1 kept no agent: after 1.0 turns of the session, the agent they ran stays its own.
      const ran = db
        .query("SELECT agent FROM sessions WHERE user_id = ? AND session_id = ?")
        .get(user, session) as { agent: string } | null;
      conv.commitTurn({
        userId: user,
        sessionId: session,
        agent: ran?.agent ?? "",
        messages,
        at: history.at,
      });
      held?.();
      r.sessions++;
    }
    // The 1.0 one is the newer: the 0.1 one stays in the kept checkpoint.json.
    if (checkpoint && !held) {
      const { cp, at } = checkpoint;
      conv.ensureSession(user, session, cp.agent, cp.user_input, at);
      // An interrupted edit's seq counts from the 0.1 history's first message: from `base` here.
      const rfs = cp.replace_from_seq;
      const body = rfs === undefined ? cp : { ...cp, replace_from_seq: rfs + base };
      conv.saveCheckpoint(user, session, JSON.stringify(body), at);
      r.checkpoints++;
    }
  };
}

/** The session's checkpoint as it is, with its input kept apart: a write that puts it back. */
function heldCheckpoint(db: Database, user: string, session: string): (() => void) | undefined {
  const where = "WHERE user_id = ? AND session_id = ?";
  const cp = db.query(`SELECT body, updated_at FROM checkpoints ${where}`).get(user, session) as {
    body: string;
    updated_at: number;
  } | null;
  if (cp === null) return undefined;
  const apart = db.query(`SELECT input FROM checkpoint_inputs ${where}`).get(user, session) as {
    input: string;
  } | null;
  return () => {
    db.query("INSERT INTO checkpoints (user_id, session_id, body, updated_at) VALUES (?, ?, ?, ?)").run(
      user,
      session,
      cp.body,
      cp.updated_at,
    );
    if (apart !== null)
      db.query("INSERT INTO checkpoint_inputs (user_id, session_id, input) VALUES (?, ?, ?)").run(
        user,
        session,
        apart.input,
      );
  };
}

function readMemory(dir: string, user: string, r: ImportReport, max: number): UnitWrite {
  const path = join(dir, "memory", "turns.json");
  const file = readFile(path, `users/${user}/memory/turns.json`, r, () =>
    TurnsSchema.parse(readJson(path, max)),
  );
  return (_conv, db, erased) => {
    if (!file) return;
    const insert = db.query(
      `INSERT INTO memory (id, user_id, session_id, seq, source, text, at) VALUES (${NEW_MEMORY_ID}, ?, ?, NULL, ?, ?, ?)`,
    );
    // Asked once per session: a file holds many turns of each.
    const gone = new Map<string, boolean>();
    const isGone = (s: string) => gone.get(s) ?? gone.set(s, erased(s)).get(s);
    for (const raw of file.turns) {
      const t = TurnSchema.safeParse(raw);
      if (!t.success || isGone(t.data.session_id)) continue;
      const { session_id, text, at } = t.data;
      insert.run(user, session_id, `session:${session_id}`, text, Date.parse(at) || 0);
      r.memory++;
    }
  };
}

/**
 * A message with only what 0.1 wrote: `by_core` is 1.0's own mark (0.1 wrote none; its requests
 * are told by their words, isRequest), and one a file made up hid the user's words, a session
 * of them left out of `sessions.list`. 0.1 had no images: `attachments` name 1.0's (ids of the
 * database), and the commit took a 1.0 message's image of the session for the imported one.
 */
function asV01(m: ChatMessage): ChatMessage {
  if (m.role !== "user" || (m.by_core === undefined && m.attachments === undefined)) return m;
  const { by_core: _, attachments: __, ...v01 } = m;
  return v01;
}

/**
 * 0.1 kept its requests to write again as plain user messages (store/earlier-requests.ts): one
 * right after an assistant message, with their words, is the core's.
 */
function isRequest(messages: readonly ChatMessage[], i: number): boolean {
  const m = messages[i] as ChatMessage;
  return m.role === "user" && messages[i - 1]?.role === "assistant" && wasWriteAgain(m.content);
}

/**
 * The marker, written last with the units' records dropped; then the folder moved aside. False
 * when another core wrote the marker first (that core moves the folder).
 */
export function finishImport(db: Database, dataDir: string, now: Date): boolean {
  const wrote = db
    .transaction(() => {
      if (marked(db)) return false;
      db.query("INSERT INTO meta (key, value) VALUES (?, ?)").run(MARKER, now.toISOString());
      db.query("DELETE FROM meta WHERE substr(key, 1, ?) = ?").run(UNIT_PREFIX.length, UNIT_PREFIX);
      return true;
    })
    .immediate();
  if (wrote) keepAside(dataDir, now);
  return wrote;
}

function keepAside(dataDir: string, now: Date): void {
  const target = join(dataDir, IMPORTED_DIR);
  try {
    ensurePrivateDir(target);
    const dest = existsSync(join(target, "users"))
      ? join(target, `users-${now.toISOString().replace(/[:.]/g, "-")}`)
      : join(target, "users");
    renameSync(join(dataDir, "users"), dest);
    tightenTree(dest);
  } catch (err) {
    // Imported all the same (the marker says so); the folder just stays where it was.
    logger.warn(
      `the imported 0.1 folder ${join(dataDir, "users")} could not be moved aside: ${(err as Error).message}`,
    );
  }
}

/** An older version made some of these folders 0755: the kept tree is the user's text, owner-only. */
function tightenTree(dir: string): void {
  // A linked `users/` moved aside is the link: its target is none of ours to chmod.
  if (process.platform === "win32" || !isRealDir(dir)) return;
  chmodSync(dir, PRIVATE_DIR_MODE);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) tightenTree(p);
    else if (e.isFile()) chmodSync(p, PRIVATE_FILE_MODE);
  }
}
