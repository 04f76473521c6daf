import type { Database } from "bun:sqlite";
import { statfsSync } from "node:fs";
import { dirname } from "node:path";

export const FTS_TABLES = ["messages_fts", "memory_fts"] as const;
export type FtsTable = (typeof FTS_TABLES)[number];

/**
 * An erase of at least this share of the indexed rows has FTS5 forget the words by merging each
 * index into one segment ('optimize') instead of its secure-delete. Measured on this 2-core box
 * (docs/agent.md "The store"): secure-delete ~10 ms a message of ~300 distinct words in an index
 * of 10,000 messages and 5,000 memory rows; 'optimize' of that whole index ~0.03 ms a row. The
 * break-even is near 1/300; the margin keeps small erases of a big index on the row-by-row way.
 */
export const BULK_SHARE = 1 / 200;
/** Fewer rows than this always go row by row. */
export const BULK_MIN_ROWS = 32;

/**
 * `remove` (rows of `messages` and `memory`, in the caller's transaction), with FTS5 made to
 * forget the removed rows' words the cheaper way: its secure-delete row by row, or, for an erase
 * of `rows` at least BULK_SHARE of the indexed rows, a plain delete and then every segment merged
 * into one without them (the old segments' pages freed, which `secure_delete` zeroes). Either way
 * no deleted word is left in the index: a user's erase of years of chats took minutes row by row
 * (8.6 s for 1,000 messages here), holding the write lock all along.
 */
export function forgettingRows<T>(
  db: Database,
  rows: number,
  remove: () => T,
  touched: readonly FtsTable[] = FTS_TABLES,
  room: (db: Database) => boolean = roomToMerge,
): T {
  if (!ftsSecureDeleteSet(db)) return remove();
  if (rows < BULK_MIN_ROWS || rows < indexedRows(db, "") * BULK_SHARE || !room(db)) {
    const out = remove();
    mergeStale(db, touched, room);
    return out;
  }
  setSecureDelete(db, 0);
  const out = remove();
  for (const t of touched) merge(db, t);
  setSecureDelete(db, 1);
  return out;
}

/**
 * After rows went by secure-delete: it leaves each index page's key (the page's first word, or
 * the start of it) in the `%_idx` table, so an index with a key that was an erased word is merged,
 * which writes the keys anew; an index already of one segment, which a merge leaves as it is, is
 * rebuilt from its rows (docs/agent.md "The store"). Not on a disk without room for either.
 */
export function forgetStaleKeys(
  db: Database,
  touched: readonly FtsTable[] = FTS_TABLES,
  room: (db: Database) => boolean = roomToMerge,
): void {
  if (ftsSecureDeleteSet(db)) mergeStale(db, touched, room);
}

/** `forgetStaleKeys` once secure-delete is known to be on. */
function mergeStale(db: Database, touched: readonly FtsTable[], room: (db: Database) => boolean): void {
  if (!room(db)) return;
  for (const t of touched) {
    if (staleIndexKeys(db, t).length === 0) continue;
    merge(db, t);
    if (staleIndexKeys(db, t).length > 0) rebuildIndex(db, t);
  }
}

/**
 * The rows each index holds, as its triggers (store/db/migrations.ts) put them in: the messages
 * index the user's and the answers' words only. FTS5's own 'rebuild' reads every row of the
 * table, tool results too, whose delete no trigger tells the index: their words stayed in it
 * after the erase, for good, and another user's message given an erased row's id was found by them.
 */
const INDEXED: Record<FtsTable, string> = {
  messages_fts: `INSERT INTO messages_fts (rowid, content)
    SELECT id, content FROM messages WHERE content IS NOT NULL AND role IN ('user', 'assistant')`,
  memory_fts: "INSERT INTO memory_fts (rowid, text) SELECT id, text FROM memory",
};

/** `table`'s index built anew from its rows (`INDEXED`): what was in it before is dropped whole. */
export function rebuildIndex(db: Database, table: FtsTable): void {
  db.run(`INSERT INTO ${table}(${table}) VALUES ('delete-all')`);
  db.run(INDEXED[table]);
}

/**
 * The open's one-time check (store/db/open.ts `repaired`): the messages index built anew where it holds a row its triggers never index (a
 * tool result, or a row gone since), as FTS5's 'rebuild' of earlier versions left it: each indexed
 * row's size entry looked up by its id, ~50 ms a 100,000 messages, once. A stale entry whose id a
 * user's or an answer's message took since (SQLite gives the highest ids again once their rows are
 * gone) has its size entry replaced by that message's, its words left under the id, and so is
 * told by the index's row count, which counted both. Where FTS5 is not, or its index was not
 * built yet (the open builds it then, `rebuildIndex`), nothing to do.
 */
export function indexOthersOut(db: Database, fts: boolean): void {
  const built = db.query("SELECT value FROM meta WHERE key = 'fts'").get() as { value: string } | null;
  if (!fts || built?.value !== "1") return;
  const other = db
    .query(
      `SELECT 1 FROM messages_fts_docsize d LEFT JOIN messages m ON m.id = d.id
       WHERE m.id IS NULL OR m.content IS NULL OR m.role NOT IN ('user', 'assistant') LIMIT 1`,
    )
    .get();
  const sized = (db.query("SELECT COUNT(*) AS n FROM messages_fts_docsize").get() as { n: number }).n;
  if (other || indexRowCount(db, "messages_fts") !== sized) rebuildIndex(db, "messages_fts");
}

/**
 * The rows `table`'s index counts as held: the first number of its totals record (FTS5 keeps it
 * at id 1 of `%_data`, a SQLite varint), raised by each insert and lowered by each delete, so a
 * row inserted again under an id still held is counted twice. No record: an empty index.
 */
export function indexRowCount(db: Database, table: FtsTable): number {
  const row = db.query(`SELECT block FROM ${table}_data WHERE id = 1`).get() as { block: Uint8Array } | null;
  const b = row?.block ?? new Uint8Array();
  let n = 0;
  for (let i = 0; i < Math.min(b.length, 9); i++) {
    const byte = b[i] ?? 0;
    if (i === 8) return n * 256 + byte;
    n = n * 128 + (byte & 0x7f);
    if (byte < 0x80) return n;
  }
  return n;
}

/**
 * The indexes' words taken out of the file where FTS5 is not: its tables stay (SQLite drops a
 * virtual table only through its module) with every message's words in them, which no erase
 * reaches with the triggers gone, so an erased user's words stayed in the file until FTS5 was
 * back. Emptied by FTS5's 'delete-all' where the module is there after all (tests' `withoutFts`),
 * else their plain tables (`secure_delete` zeroes the pages), their settings kept; the open
 * builds them anew from the rows where FTS5 is (`rebuildIndex`).
 */
export function emptyIndexTables(db: Database): void {
  for (const t of FTS_TABLES) {
    try {
      db.run(`INSERT INTO ${t}(${t}) VALUES ('delete-all')`);
      continue;
    } catch {} // no such module: its tables are plain ones
    for (const part of ["data", "idx", "docsize"]) {
      const name = `${t}_${part}`;
      if (db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(name)) {
        db.run(`DELETE FROM ${name}`);
      }
    }
  }
}

/** Every segment of `table`'s index merged into one, without the words deleted from it. */
function merge(db: Database, table: FtsTable): void {
  db.run(`INSERT INTO ${table}(${table}) VALUES ('optimize')`);
}

/**
 * The keys of `table`'s index pages (its `%_idx` rows: a page's first word, or as many bytes of it
 * as tell it from the page before, after a byte naming the index) that begin no word the index
 * still holds: left by a secure-delete of the word that began the page. Compared as bytes (a key
 * may end inside a character), one range look a page, in SQLite.
 */
export function staleIndexKeys(db: Database, table: FtsTable): Uint8Array[] {
  const vocab = `temp.${table}_words`;
  db.run(`CREATE VIRTUAL TABLE IF NOT EXISTS ${vocab} USING fts5vocab(main, ${table}, 'row')`);
  try {
    const rows = db
      .query(
        `SELECT key FROM (SELECT substr(term, 2) AS key FROM ${table}_idx WHERE length(term) > 1)
         WHERE NOT EXISTS (SELECT 1 FROM ${vocab}
           WHERE term >= CAST(key AS TEXT) AND term < CAST(key || x'ff' AS TEXT))`,
      )
      .all() as { key: Uint8Array }[];
    return rows.map((r) => r.key);
  } finally {
    db.run(`DROP TABLE IF EXISTS ${vocab}`);
  }
}

/**
 * The merge writes each index anew into the log: room for twice the database on its disk, else
 * row by row (whose log grows with the rows erased only), so a nearly full disk does not make an
 * erase fail that row by row would finish. A disk the OS will not measure: row by row.
 */
export function roomToMerge(db: Database): boolean {
  try {
    const file = (db.query("PRAGMA database_list").all() as { name: string; file: string }[]).find(
      (d) => d.name === "main",
    )?.file;
    if (!file) return false;
    const size = db
      .query("SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()")
      .get() as {
      n: number;
    };
    const disk = statfsSync(dirname(file));
    return disk.bavail * disk.bsize > 2 * size.n;
  } catch {
    return false;
  }
}

/** FTS5's `secure-delete` on in both indexes (it is kept in the database); false without them. */
export function ftsSecureDeleteSet(db: Database): boolean {
  try {
    return FTS_TABLES.every((t) => {
      const row = db.query(`SELECT v FROM ${t}_config WHERE k = 'secure-delete'`).get() as {
        v: number;
      } | null;
      return Number(row?.v) === 1;
    });
  } catch {
    return false; // no such table: a SQLite without FTS5, or a copy set aside before it
  }
}

function setSecureDelete(db: Database, on: 0 | 1): void {
  for (const t of FTS_TABLES) db.run(`INSERT INTO ${t}(${t}, rank) VALUES ('secure-delete', ${on})`);
}

/** Rows of the indexed tables (`messages`, `memory`) a `WHERE` clause picks (`""`: all), for `forgettingRows`. */
export function indexedRows(db: Database, where: string, ...args: (string | number)[]): number {
  const row = db
    .query(`SELECT (SELECT COUNT(*) FROM messages ${where}) + (SELECT COUNT(*) FROM memory ${where}) AS n`)
    .get(...args, ...args) as { n: number };
  return row.n;
}
