/**
 * The database's schema, one numbered step at a time (SQLite's `user_version` holds the last
 * step applied). A step is never edited once released: a change is a new step. Each runs in
 * the transaction that opens the store, so a crash mid-migration leaves the previous version.
 *
 * Times are integer milliseconds since the epoch. Every table that holds a user's text is
 * keyed by user so that `users.delete` is one statement per table.
 */
import type { Database } from "bun:sqlite";
import { WAS_WRITE_AGAIN_SQL } from "../earlier-requests.ts";
import { previewOf } from "../title.ts";

export interface Migration {
  version: number;
  /** Statements run in order; `fts` ones only where SQLite has FTS5 (else the LIKE fallback). */
  sql: readonly string[];
  fts?: readonly string[];
  /** Run after `sql` (and `fts`), for what SQL alone cannot do: a preview cut as title.ts cuts it. */
  after?: (db: Database, fts: boolean) => void;
}

/** Migration 7: the sessions with a request marked get the count and preview `sessions.*` now show. */
function recountShown(db: Database): void {
  const marked = db.query("SELECT DISTINCT user_id, session_id FROM messages WHERE by_core = 1").all() as {
    user_id: string;
    session_id: string;
  }[];
  const last = db.query(
    `SELECT content FROM messages WHERE user_id = ? AND session_id = ? AND by_core = 0
     AND role IN ('user', 'assistant') AND content != '' ORDER BY seq DESC LIMIT 1`,
  );
  const update = db.query(
    `UPDATE sessions SET preview = COALESCE(?, preview), message_count = (SELECT COUNT(*) FROM messages m
       WHERE m.user_id = sessions.user_id AND m.session_id = sessions.session_id AND m.by_core = 0)
     WHERE user_id = ? AND session_id = ?`,
  );
  for (const { user_id: u, session_id: s } of marked) {
    const text = last.get(u, s) as { content: string } | null;
    update.run(text ? previewOf(text.content) : null, u, s);
  }
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: [
      `CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`,
      `CREATE TABLE sessions (
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        renamed INTEGER NOT NULL DEFAULT 0,
        agent TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0,
        preview TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (user_id, session_id)
      ) STRICT, WITHOUT ROWID`,
      `CREATE INDEX sessions_newest ON sessions (user_id, updated_at DESC, session_id DESC)`,
      `CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
        content TEXT,
        reasoning TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        usage TEXT,
        created_at INTEGER NOT NULL,
        UNIQUE (user_id, session_id, seq),
        FOREIGN KEY (user_id, session_id) REFERENCES sessions ON DELETE CASCADE
      ) STRICT`,
      `CREATE TABLE checkpoints (
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, session_id),
        FOREIGN KEY (user_id, session_id) REFERENCES sessions ON DELETE CASCADE
      ) STRICT, WITHOUT ROWID`,
      // One row per remembered turn (user_id set) or chunk of a memory.folders file (user_id ''
      // and the folder in `root`); `seq` is the turn's user message, so an edit that drops the
      // turn drops its memory too.
      `CREATE TABLE memory (
        id INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '',
        seq INTEGER,
        source TEXT NOT NULL,
        root TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        at INTEGER NOT NULL
      ) STRICT`,
      `CREATE INDEX memory_by_session ON memory (user_id, session_id, seq)`,
      `CREATE INDEX memory_by_file ON memory (root, source) WHERE user_id = ''`,
      // The files of memory.folders already indexed, so a start re-reads only what changed.
      `CREATE TABLE memory_files (
        path TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ms INTEGER NOT NULL
      ) STRICT, WITHOUT ROWID`,
      // A turn in progress on a session, across processes (store/session-lease.ts).
      `CREATE TABLE session_leases (
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        pid INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, session_id)
      ) STRICT, WITHOUT ROWID`,
    ],
    fts: [
      // External-content indexes: the text lives once, in its table; triggers keep the index.
      `CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, content='messages', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2')`,
      `CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages WHEN new.content IS NOT NULL
        AND new.role IN ('user', 'assistant') BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END`,
      `CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages WHEN old.content IS NOT NULL
        AND old.role IN ('user', 'assistant') BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END`,
      `CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, content='memory', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2')`,
      `CREATE TRIGGER IF NOT EXISTS memory_fts_insert AFTER INSERT ON memory BEGIN
        INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END`,
      `CREATE TRIGGER IF NOT EXISTS memory_fts_delete AFTER DELETE ON memory BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
    ],
  },
  {
    version: 2,
    sql: [
      // One row per erase (store/erasures.ts): ids and a time, never text; session_id '' is the
      // whole user. AUTOINCREMENT keeps the numbers rising after old rows are pruned.
      `CREATE TABLE erasures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        at INTEGER NOT NULL
      ) STRICT`,
      `CREATE INDEX erasures_by_user ON erasures (user_id, id)`,
    ],
  },
  {
    version: 3,
    sql: [
      // Documents handed to the assistant (docs/agent.md "Documents"): session_id '' is the
      // user's library, else that session's attachment. The text lives in `memory`, one row per
      // chunk, so FTS (and vectors) cover it with no table of their own.
      `CREATE TABLE documents (
        document_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '',
        name TEXT NOT NULL,
        format TEXT NOT NULL,
        chunks INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      ) STRICT, WITHOUT ROWID`,
      `CREATE INDEX documents_by_user ON documents (user_id, session_id, created_at)`,
      // A document's chunk: its document and number (NULL for turns and folder passages).
      `ALTER TABLE memory ADD COLUMN document_id TEXT`,
      `ALTER TABLE memory ADD COLUMN chunk INTEGER`,
      `CREATE INDEX memory_by_document ON memory (document_id, chunk) WHERE document_id IS NOT NULL`,
      // The passages an answer was given from (JSON, docs/protocol.md "Citations").
      `ALTER TABLE messages ADD COLUMN sources TEXT`,
    ],
  },
  {
    version: 4,
    sql: [
      // One vector per memory row (store/memory-vectors.ts), gone with its row (the cascade), so
      // an erase takes it too. `fingerprint` names the embedding model that made it: another
      // model's vectors are never compared with a query. `vector` is Float32 little-endian,
      // L2-normalized as llama-server returns it; `bits` its sign bits (store/vector-index.ts),
      // read alone to load the in-memory index. `id` only rises, so an index catches up with
      // rows added since it was loaded (another core's too).
      `CREATE TABLE memory_vectors (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id INTEGER NOT NULL UNIQUE REFERENCES memory (id) ON DELETE CASCADE,
        fingerprint TEXT NOT NULL,
        dimensions INTEGER NOT NULL,
        vector BLOB NOT NULL,
        bits BLOB NOT NULL
      ) STRICT`,
      `CREATE INDEX memory_vectors_by_model ON memory_vectors (fingerprint, id)`,
      // Which rows' vectors were deleted, by any path or process (an erase, an edit, a folder
      // file changed, another core): an in-memory index drops them by reading past its last seq.
      // Row ids only, never text; the oldest go once 100,000 are kept (an index that far behind
      // loads again).
      `CREATE TABLE memory_vector_deletions (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id INTEGER NOT NULL
      ) STRICT`,
      `CREATE TRIGGER memory_vectors_deleted AFTER DELETE ON memory_vectors BEGIN
        INSERT INTO memory_vector_deletions (memory_id) VALUES (old.memory_id);
        DELETE FROM memory_vector_deletions WHERE seq <= (SELECT max(seq) FROM memory_vector_deletions) - 100000;
      END`,
    ],
  },
  {
    version: 5,
    sql: [
      // A user message's images (docs/protocol.md#images). `seq` is the message's; NULL while
      // its turn is in flight (the checkpoint names the ids), so a turn that never commits leaves
      // nothing a later one would show. `tokens`: what llama-server counted for the image once
      // sent (the history's budget). AUTOINCREMENT: an id a host kept never comes back naming
      // another image. The bytes live in a table of their own, in parts of about 1 MB: SQLite
      // rewrites a whole row on UPDATE (giving an image its seq must not copy 20 MB), and builds
      // a whole row in memory to write it (a part at a time, a 20 MB image costs 1 MB to keep,
      // and a full disk's erase removes it a part a step).
      `CREATE TABLE attachments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER,
        mime TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        tokens INTEGER,
        created_at INTEGER NOT NULL,
        FOREIGN KEY (user_id, session_id) REFERENCES sessions ON DELETE CASCADE
      ) STRICT`,
      `CREATE INDEX attachments_by_message ON attachments (user_id, session_id, seq)`,
      `CREATE TABLE attachment_data (
        rowid INTEGER PRIMARY KEY,
        id INTEGER NOT NULL REFERENCES attachments ON DELETE CASCADE,
        part INTEGER NOT NULL,
        user_id TEXT NOT NULL,
        data BLOB NOT NULL,
        UNIQUE (id, part)
      ) STRICT`,
    ],
  },
  {
    version: 6,
    sql: [
      // `erasures` names a user and a session by a keyed hash (store/erasures.ts), never the id a
      // host chose (an email address may be one): its key, random per database. The rows an
      // earlier version wrote hold the ids as given: pruned, the turns begun before them refused
      // as the pruning after a day does.
      `INSERT OR IGNORE INTO meta (key, value) VALUES ('erasure_key', lower(hex(randomblob(32))))`,
      `INSERT OR REPLACE INTO meta (key, value)
        SELECT 'erasures_pruned_through', CAST(id AS TEXT) FROM erasures ORDER BY id DESC LIMIT 1`,
      `DELETE FROM erasures`,
    ],
  },
  {
    version: 7,
    sql: [
      // 1: the core wrote it (a request to write again, agent/write-again.ts), not the user: sent
      // to the model, left out of sessions.get, the export, the preview and search.
      `ALTER TABLE messages ADD COLUMN by_core INTEGER NOT NULL DEFAULT 0`,
      // Those stored before, known once by their text where only the core's can be: within a
      // turn, right after its assistant message (one commit, one time), never a turn's opening.
      `UPDATE messages SET by_core = 1 WHERE role = 'user' AND seq > 0 AND ${WAS_WRITE_AGAIN_SQL}
        AND EXISTS (SELECT 1 FROM messages p WHERE p.user_id = messages.user_id
          AND p.session_id = messages.session_id AND p.seq = messages.seq - 1
          AND p.role = 'assistant' AND p.created_at = messages.created_at)`,
    ],
    after: recountShown,
  },
  {
    version: 8,
    sql: [
      // `documents.list` of the whole library, a page at a time, newest first (store/
      // document-pages.ts): a range of this index, where `documents_by_user` (by session first)
      // had every document of the user read and sorted for each page.
      `CREATE INDEX IF NOT EXISTS documents_by_time ON documents (user_id, created_at, document_id)`,
    ],
  },
  {
    version: 9,
    sql: [
      // A long chat input, kept apart from its checkpoint's body so that the turn's later saves
      // do not write it again (store/checkpoint.ts INPUT_APART_CHARS). It goes with its
      // checkpoint (a commit, a drop, a session's erase: the cascade goes on from `sessions`).
      `CREATE TABLE IF NOT EXISTS checkpoint_inputs (
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        input TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id),
        FOREIGN KEY (user_id, session_id) REFERENCES checkpoints ON DELETE CASCADE
      ) STRICT`,
    ],
  },
  {
    version: 10,
    sql: [
      // No memory id is given again (store/memory-ids.ts): the highest ever held, raised as each
      // row goes in, whoever writes it; new rows take the next one.
      `INSERT OR IGNORE INTO meta (key, value) SELECT 'memory_id_high', CAST(COALESCE(MAX(id), 0) AS TEXT) FROM memory`,
      `CREATE TRIGGER IF NOT EXISTS memory_id_high AFTER INSERT ON memory BEGIN
        UPDATE meta SET value = CAST(new.id AS TEXT)
          WHERE key = 'memory_id_high' AND CAST(value AS INTEGER) < new.id; END`,
    ],
  },
  {
    version: 11,
    sql: [
      // `sessions.search`'s LIKE match, newest first, a page at a time (store/session-search.ts):
      // a range of this index, stopped once it has its hits, where without it every message of
      // the user was matched and sorted before the first hit was answered.
      `CREATE INDEX IF NOT EXISTS messages_newest ON messages (user_id, created_at, seq)`,
    ],
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;
