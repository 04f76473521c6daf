import type { Database } from "bun:sqlite";
import {
  chmodSync,
  closeSync,
  existsSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { type ChatMessage, ChatMessageSchema } from "../protocol/chat-message.ts";
import { SafeIdSchema } from "../protocol/safe-id.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateDir, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../util/private-fs.ts";
import { openRegularFile } from "../util/read-file.ts";
import { writeFileAtomic } from "./atomic.ts";
import { CheckpointSchema } from "./checkpoint.ts";
import { Conversations } from "./conversations.ts";
import { wasWriteAgain } from "./earlier-requests.ts";

/**
 * The 0.1 layout (one folder per session under `users/`,
 * docs/agent.md#the-store-one-sqlite-database-srcstore, "Import of the 0.1 layout"): read once into
 * the database, then the folder is moved to `imported-0.1/`, kept, never deleted — except what
 * `sessions.delete` and `users.delete` erase (eraseImported).
 */
export const IMPORTED_DIR = "imported-0.1";
const MARKER = "import_v01";

const HistorySchema = z.object({ version: z.literal(1), messages: z.array(ChatMessageSchema) });
const TurnSchema = z.object({ id: z.string(), session_id: SafeIdSchema, text: z.string(), at: z.string() });
const TurnsSchema = z.object({ version: z.literal(1), turns: z.array(z.unknown()) });
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

/** Imports `dataDir/users` unless done already; returns undefined when there was nothing to do. */
export function importV01(db: Database, dataDir: string, now: Date): ImportReport | undefined {
  const users = join(dataDir, "users");
  // Read first: a database imported before takes no write lock at open (another core may hold it).
  if (db.query("SELECT 1 FROM meta WHERE key = ?").get(MARKER)) return undefined;
  const report = db
    .transaction((): ImportReport | undefined => {
      if (db.query("SELECT 1 FROM meta WHERE key = ?").get(MARKER)) return undefined;
      db.query("INSERT INTO meta (key, value) VALUES (?, ?)").run(MARKER, now.toISOString());
      if (!existsSync(users)) return undefined;
      const r: ImportReport = { sessions: 0, checkpoints: 0, memory: 0, skipped: [] };
      for (const user of safeEntries(users)) importUser(db, join(users, user), user, r);
      return r;
    })
    .immediate();
  if (!report) return undefined;
  keepAside(dataDir, now);
  logger.info(
    `imported the 0.1 data folder: ${report.sessions} sessions, ${report.checkpoints} interrupted turns, ${report.memory} memory entries${report.skipped.length ? `; not imported (unreadable, kept in ${IMPORTED_DIR}/): ${report.skipped.join(", ")}` : ""}`,
  );
  return report;
}

function safeEntries(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() && isSafeId(e.name))
      .map((e) => e.name);
  } catch {
    return [];
  }
}

/** Past this a 0.1 file is not read (the 0.1 store kept whole histories; none came near it). */
const MAX_V01_FILE_BYTES = 256 * 2 ** 20;

/** A 0.1 file's JSON; a FIFO or anything but a regular file in its place is refused, never waited on. */
function readJson(path: string): unknown {
  const { fd, size } = openRegularFile(path);
  try {
    if (size > MAX_V01_FILE_BYTES) throw new Error(`over ${MAX_V01_FILE_BYTES} bytes`);
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

function importUser(db: Database, dir: string, user: string, r: ImportReport): void {
  const conv = new Conversations(db);
  const sessions = join(dir, "sessions");
  for (const session of existsSync(sessions) ? safeEntries(sessions) : []) {
    const sdir = join(sessions, session);
    importHistory(conv, sdir, user, session, r);
    importCheckpoint(conv, sdir, user, session, r);
  }
  const turns = join(dir, "memory", "turns.json");
  if (!existsSync(turns)) return;
  try {
    const file = TurnsSchema.parse(readJson(turns));
    const insert = db.query(
      "INSERT INTO memory (user_id, session_id, seq, source, text, at) VALUES (?, ?, NULL, ?, ?, ?)",
    );
    for (const raw of file.turns) {
      const t = TurnSchema.safeParse(raw);
      if (!t.success) continue;
      insert.run(
        user,
        t.data.session_id,
        `session:${t.data.session_id}`,
        t.data.text,
        Date.parse(t.data.at) || 0,
      );
      r.memory++;
    }
  } catch {
    r.skipped.push(`users/${user}/memory/turns.json`);
  }
}

/** Runs `load` on one 0.1 file that exists; one that cannot be used is reported, not imported. */
function importFile(path: string, label: string, r: ImportReport, load: () => void): void {
  if (!existsSync(path)) return;
  try {
    load();
  } catch {
    r.skipped.push(label);
  }
}

function importHistory(
  conv: Conversations,
  dir: string,
  user: string,
  session: string,
  r: ImportReport,
): void {
  const path = join(dir, "history.json");
  importFile(path, `users/${user}/sessions/${session}/history.json`, r, () => {
    const history = HistorySchema.parse(readJson(path));
    if (history.messages.length === 0) return;
    const at = statSync(path).mtime;
    const messages = history.messages.map((m, i) =>
      isRequest(history.messages, i) ? { ...m, by_core: true as const } : m,
    );
    conv.commitTurn({ userId: user, sessionId: session, agent: "", messages, at });
    r.sessions++;
  });
}

/**
 * 0.1 kept its requests to write again as plain user messages (store/earlier-requests.ts): one
 * right after an assistant message, with their words, is the core's.
 */
function isRequest(messages: readonly ChatMessage[], i: number): boolean {
  const m = messages[i] as ChatMessage;
  return m.role === "user" && messages[i - 1]?.role === "assistant" && wasWriteAgain(m.content);
}

function importCheckpoint(
  conv: Conversations,
  dir: string,
  user: string,
  session: string,
  r: ImportReport,
): void {
  const path = join(dir, "checkpoint.json");
  importFile(path, `users/${user}/sessions/${session}/checkpoint.json`, r, () => {
    const cp = CheckpointSchema.parse(readJson(path));
    const at = new Date(Date.parse(cp.updated_at) || statSync(path).mtimeMs);
    conv.ensureSession(user, session, cp.agent, cp.user_input, at);
    conv.saveCheckpoint(user, session, JSON.stringify(cp), at);
    r.checkpoints++;
  });
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
  if (process.platform === "win32") return;
  chmodSync(dir, PRIVATE_DIR_MODE);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) tightenTree(p);
    else if (e.isFile()) chmodSync(p, PRIVATE_FILE_MODE);
  }
}

/** Every 0.1 folder tree that may hold a user's files: in place, or kept aside after import. */
function userTrees(dataDir: string, userId: string): string[] {
  const trees = [join(dataDir, "users", userId)];
  const aside = join(dataDir, IMPORTED_DIR);
  if (existsSync(aside)) {
    for (const e of readdirSync(aside)) if (e.startsWith("users")) trees.push(join(aside, e, userId));
  }
  return trees.filter((t) => existsSync(t));
}

/**
 * Erases a user's (or one session's) text from the 0.1 files: the folders go, and the memory
 * files lose that session's entries (a memory file that cannot be parsed goes when it names
 * the session, since its valid entries were imported already).
 */
export function eraseImported(dataDir: string, userId: string, sessionId?: string): void {
  for (const tree of userTrees(dataDir, userId)) {
    if (sessionId === undefined) {
      rmSync(tree, { recursive: true, force: true });
      continue;
    }
    rmSync(join(tree, "sessions", sessionId), { recursive: true, force: true });
    const memory = join(tree, "memory");
    if (!existsSync(memory)) continue;
    for (const name of readdirSync(memory)) {
      if (name.startsWith("turns.json")) dropSessionTurns(join(memory, name), sessionId);
    }
  }
}

function dropSessionTurns(path: string, sessionId: string): void {
  let value: unknown;
  try {
    value = readJson(path);
  } catch (err) {
    // Unparseable (its valid entries were imported): it goes when it names the session.
    if (!(err instanceof SyntaxError)) return;
    if (readFileSync(path, "utf8").includes(JSON.stringify(sessionId))) rmSync(path, { force: true });
    return;
  }
  try {
    const file = TurnsSchema.parse(value);
    const kept = file.turns.filter((t) => (t as { session_id?: unknown })?.session_id !== sessionId);
    if (kept.length !== file.turns.length) writeFileAtomic(path, JSON.stringify({ version: 1, turns: kept }));
  } catch {
    if (JSON.stringify(value).includes(JSON.stringify(sessionId))) rmSync(path, { force: true });
  }
}
