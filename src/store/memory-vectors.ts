import type { Database } from "bun:sqlite";
import { logger } from "../util/logger.ts";
import { dot, ownerKey, SignIndex, signBits, wordsFor } from "./vector-index.ts";

/** A query's vector and the embedding model (its fingerprint) that made it. */
export interface QueryVector {
  fingerprint: string;
  vector: ArrayLike<number>;
}

/** A memory row's vector, as the embedding model returned it (L2-normalized). */
export interface RowVector {
  id: number;
  vector: ArrayLike<number>;
  /**
   * The text it was made from: stored only if the row still holds it. A row erased while its text
   * was being embedded may have its id taken by a new row (ids are reused), which must not get
   * a vector of the erased text.
   */
  text?: string;
}

/** The scope a search is limited to: a SQL condition on `m` (the memory row) and its parameters. */
export interface Scope {
  sql: string;
  params: Record<string, string | number>;
  /**
   * The `memory.user_id`s the scope can reach (the user's and '' for shared rows): the in-memory
   * scan skips others before the SQL filter decides.
   */
  owners: readonly string[];
  /**
   * The owner (`ownerKey(user, session)`: the chat's own session's turns) the scope leaves out,
   * skipped by the scan too, so one long conversation's own turns never fill its candidates.
   */
  skipOwner?: string;
}

/**
 * Candidates the sign-bit scan nominates for exact rescoring: measured with bench/retrieval.ts
 * (docs/performance.md, "Memory recall"), where 256 keeps the top 10 equal to an exact search's.
 */
export const CANDIDATES = 256;
/** A memory row without a vector (or a refusal) of `$fp`, its document (if any) committed. */
const LACKING = `NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id AND v.fingerprint IN ($fp, $refused))
  AND (m.document_id IS NULL OR EXISTS (SELECT 1 FROM documents d WHERE d.document_id = m.document_id))`;

/** The fingerprint under which rows a model cannot embed are marked (`MemoryVectors.refuse`). */
export function refusedBy(fingerprint: string): string {
  return `${fingerprint}:refused`;
}

/** The most candidates a search widens to, in multiples of CANDIDATES (4 → 16 → 64). */
const WIDEST = 64;
/** Vectors a search reads into the index itself (tens of ms here); the rest in slices of SLICE_ROWS. */
const SYNC_ROWS = 10_000;
const SLICE_ROWS = 5_000;

/**
 * The vectors of memory rows (docs/agent.md, "Memory"), in the `memory_vectors` table, and the
 * in-memory sign-bit index over them (store/vector-index.ts), loaded in slices when the embedder
 * starts (`warm`; else by the first search) and caught up before each search: rows added since (here or by another core on the same database) are
 * read by their rising id; a delete anywhere (an erase, an edited turn, a folder file changed)
 * is logged by a trigger, and the index drops those ids. Whatever the index holds,
 * a search returns only rows that exist, are in scope and carry a vector of the query's model:
 * the candidates' exact vectors are read through that SQL.
 */
export class MemoryVectors {
  private index: SignIndex | undefined;
  private fingerprint = "";
  private lastId = 0;
  /** The last `memory_vector_deletions.seq` this index has applied. */
  private deletions = 0;
  private warming: Promise<void> | undefined;

  private readonly syncRows: number;
  private readonly sliceRows: number;

  constructor(
    private readonly db: Database,
    /** Tests: the rows a search reads itself, and the slice the rest is read in. */
    options: { syncRows?: number; sliceRows?: number } = {},
  ) {
    this.syncRows = options.syncRows ?? SYNC_ROWS;
    this.sliceRows = options.sliceRows ?? SLICE_ROWS;
  }

  /**
   * Stores each row's vector under `fingerprint`, replacing another model's; a row deleted since
   * it was read, or given a vector of this model meanwhile (the background job and a document's
   * add both at work), is skipped. Runs in the caller's write (Store.write). Returns the vectors
   * stored, so a caller's count of rows embedded never counts one twice.
   */
  put(fingerprint: string, rows: readonly RowVector[]): number {
    const insert = this.db.query(
      `INSERT OR REPLACE INTO memory_vectors (memory_id, fingerprint, dimensions, vector, bits)
       SELECT $id, $fp, $dims, $vector, $bits
       WHERE EXISTS (SELECT 1 FROM memory WHERE id = $id AND ($text IS NULL OR text = $text))
       AND NOT EXISTS (SELECT 1 FROM memory_vectors WHERE memory_id = $id AND fingerprint = $fp)`,
    );
    let stored = 0;
    this.db.transaction(() => {
      for (const row of rows) {
        const floats = Float32Array.from(row.vector);
        const bits = signBits(floats);
        stored += insert.run({
          id: row.id,
          fp: fingerprint,
          dims: floats.length,
          vector: new Uint8Array(floats.buffer),
          bits: new Uint8Array(bits.buffer),
          text: row.text ?? null,
        }).changes;
      }
    })();
    return stored;
  }

  /**
   * Marks rows the model behind `fingerprint` cannot embed even shortened (docs/agent.md, "Memory
   * that understands meaning"), so the job stops asking for them: a row in `memory_vectors` with
   * no vector under a fingerprint of its own (`refusedBy`), which no search or index reads. A
   * changed model tries them again. Runs in the caller's write; returns the rows marked.
   */
  refuse(fingerprint: string, rows: readonly { id: number; text: string }[]): number {
    // Never over a vector of the model: the other path (job or add) may have embedded it meanwhile.
    const insert = this.db.query(
      `INSERT OR REPLACE INTO memory_vectors (memory_id, fingerprint, dimensions, vector, bits)
       SELECT $id, $refused, 0, x'', x''
       WHERE EXISTS (SELECT 1 FROM memory WHERE id = $id AND text = $text)
       AND NOT EXISTS (SELECT 1 FROM memory_vectors WHERE memory_id = $id AND fingerprint IN ($fp, $refused))`,
    );
    let marked = 0;
    this.db.transaction(() => {
      for (const r of rows)
        marked += insert.run({
          id: r.id,
          text: r.text,
          fp: fingerprint,
          refused: refusedBy(fingerprint),
        }).changes;
    })();
    return marked;
  }

  /**
   * Rows without a vector (or a refusal) of `fingerprint`, newest first: of `ids` when given,
   * else of all (below the id `below`, when given). A document's chunks count only once it is
   * committed: its add embeds them then (Services.embedChunks), and a pending add's rows may yet
   * be discarded.
   */
  lacking(
    fingerprint: string,
    limit: number,
    ids?: readonly number[],
    below = Number.MAX_SAFE_INTEGER,
  ): { id: number; text: string }[] {
    // Given ids drive the join (CROSS JOIN), else SQLite reads every row to test the list.
    const from = ids ? "json_each($ids) c CROSS JOIN memory m ON m.id = c.value" : "memory m";
    return this.db
      .query(
        `SELECT m.id, m.text FROM ${from} WHERE m.id < $below AND ${LACKING} ORDER BY m.id DESC LIMIT $n`,
      )
      .all({
        fp: fingerprint,
        refused: refusedBy(fingerprint),
        n: limit,
        below,
        ...(ids ? { ids: JSON.stringify(ids) } : {}),
      }) as {
      id: number;
      text: string;
    }[];
  }

  /**
   * Which of `ids` lack a vector of `fingerprint`, in rising order: ids only (about 3 ms a
   * thousand), so a document's text is read a batch at a time (`lacking`).
   */
  lackingIds(fingerprint: string, ids: readonly number[]): number[] {
    const rows = this.db
      .query(
        `SELECT m.id FROM json_each($ids) c CROSS JOIN memory m ON m.id = c.value
         WHERE ${LACKING} ORDER BY m.id`,
      )
      .all({ fp: fingerprint, refused: refusedBy(fingerprint), ids: JSON.stringify(ids) }) as {
      id: number;
    }[];
    return rows.map((r) => r.id);
  }

  /**
   * What `status.memory_index` shows: `total`, the memory rows to embed (a pending document's
   * chunks, and rows this model refused, left out); `embedded`, those with a vector of
   * `fingerprint` (never more than `total`: a vector left on an uncommitted chunk by an older
   * core is not counted past it).
   */
  counts(fingerprint: string): { embedded: number; total: number } {
    const { embedded, total } = this.tally(fingerprint);
    return { embedded, total };
  }

  /**
   * `counts`, and the rows `fingerprint`'s model cannot embed, marked refused (`refuse`): status's
   * `set_aside`, read in the same look (the refused rows are counted for `total` anyway).
   */
  tally(fingerprint: string): { embedded: number; total: number; refused: number } {
    const count = (sql: string, ...params: string[]) =>
      (this.db.query(sql).get(...params) as { n: number }).n;
    const vectors = "SELECT count(*) AS n FROM memory_vectors WHERE fingerprint = ?";
    const all = count("SELECT count(*) AS n FROM memory");
    // The documents found by skipping through the document index (a row each, not a chunk each:
    // 0.2 ms where counting every chunk took 60 ms for 100,000), then only the pending ones' chunks.
    const pending = count(
      `WITH RECURSIVE docs(id) AS (
         SELECT (SELECT min(document_id) FROM memory WHERE document_id IS NOT NULL)
         UNION ALL SELECT (SELECT min(document_id) FROM memory WHERE document_id > docs.id)
         FROM docs WHERE docs.id IS NOT NULL)
       SELECT count(*) AS n FROM memory WHERE document_id IN (SELECT id FROM docs
         WHERE id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.document_id = docs.id))`,
    );
    const refused = count(vectors, refusedBy(fingerprint));
    const total = Math.max(0, all - pending - refused);
    return { embedded: Math.min(count(vectors, fingerprint), total), total, refused };
  }

  /**
   * The `k` rows in `scope` most similar to the query (cosine: both are L2-normalized), best
   * first: the sign-bit scan's nearest CANDIDATES, rescored exactly; more are taken while the
   * scope's filter leaves fewer than half of them (up to 64 times as many).
   */
  nearest(
    query: QueryVector,
    scope: Scope,
    k: number,
    candidates = CANDIDATES,
  ): { id: number; score: number }[] {
    if (k <= 0 || query.vector.length === 0) return [];
    const index = this.synced(query.fingerprint, query.vector.length);
    const bits = signBits(query.vector, index.words);
    const exact = this.db.query(
      // CROSS JOIN keeps the candidates first: left to itself, SQLite scans every vector of the model.
      `SELECT v.memory_id AS id, v.vector FROM json_each($ids) c
       CROSS JOIN memory_vectors v ON v.memory_id = c.value JOIN memory m ON m.id = v.memory_id
       WHERE v.fingerprint = $fp AND v.dimensions = $dims AND ${scope.sql}`,
    );
    let rows: { id: number; vector: Uint8Array }[] = [];
    for (let n = Math.max(candidates, k); ; n *= 4) {
      const ids = index.nearest(bits, n, scope.owners, scope.skipOwner);
      rows = exact.all({
        ...scope.params,
        ids: JSON.stringify(ids),
        fp: query.fingerprint,
        dims: query.vector.length,
      }) as typeof rows;
      // Bounded: a scope that leaves almost nothing (one huge session, the one excluded) costs
      // a few widenings, never a read of every vector on the main loop.
      if (rows.length >= Math.min(n, candidates) / 2 || ids.length < n || n >= candidates * WIDEST) break;
    }
    return rows
      .map((r) => ({ id: r.id, score: dot(query.vector, floatsOf(r.vector)) }))
      .sort((a, b) => b.score - a.score || b.id - a.id)
      .slice(0, k);
  }

  /** Bytes the in-memory index holds (docs/performance.md). */
  indexBytes(): number {
    return this.index?.bytes() ?? 0;
  }

  /**
   * The index for `fingerprint`, caught up with the table: the deletions logged since its last
   * look dropped, then the vectors added since read (in that order, so a row id deleted and used
   * again ends with its new vector). Loaded whole the first time, for another model, or when the
   * log has been pruned past where it last read.
   */
  private synced(fingerprint: string, dimensions: number, rows = this.syncRows): SignIndex {
    const log = this.db
      .query("SELECT min(seq) AS first, max(seq) AS last FROM memory_vector_deletions")
      .get() as { first: number | null; last: number | null };
    const behind = log.first !== null && log.first > this.deletions + 1;
    if (!this.index || this.fingerprint !== fingerprint || this.index.dimensions !== dimensions || behind) {
      this.index = new SignIndex(dimensions);
      this.fingerprint = fingerprint;
      this.lastId = 0;
      this.deletions = log.last ?? 0;
    } else if (log.last !== null && log.last > this.deletions) {
      const gone = this.db
        .query("SELECT seq, memory_id FROM memory_vector_deletions WHERE seq > ? ORDER BY seq")
        .all(this.deletions) as { seq: number; memory_id: number }[];
      for (const row of gone) {
        this.index.remove(row.memory_id);
        this.deletions = row.seq;
      }
    }
    // A big backlog (the first search of a large memory) is read here only in part, the rest in
    // slices off this call: candidates from a partial index are fewer, never wrong.
    if (this.addSince(fingerprint, dimensions, rows) && !this.warming) void this.warm(fingerprint);
    return this.index;
  }

  /**
   * Loads (or catches up) the index for `fingerprint` in slices, the event loop given back between
   * them, so a large memory is read before the first search needs it (the embedder calls it).
   */
  warm(fingerprint: string): Promise<void> {
    this.warming ??= (async () => {
      try {
        const row = this.db
          .query("SELECT dimensions FROM memory_vectors WHERE fingerprint = ? AND dimensions > 0 LIMIT 1")
          .get(fingerprint) as { dimensions: number } | null;
        if (!row) return;
        this.synced(fingerprint, row.dimensions, 0);
        do await new Promise((r) => setImmediate(r));
        while (
          this.fingerprint === fingerprint &&
          this.addSince(fingerprint, row.dimensions, this.sliceRows)
        );
      } catch (err) {
        // The store closed meanwhile, or a read failed: the next search catches up itself.
        logger.debug(`memory: loading the vector index stopped: ${(err as Error).message}`);
      } finally {
        this.warming = undefined;
      }
    })();
    return this.warming;
  }

  /** Reads up to `limit` vectors added since the last read into the index; true when more remain. */
  private addSince(fingerprint: string, dimensions: number, limit: number): boolean {
    const index = this.index;
    if (!index || limit <= 0) return false;
    const added = this.db
      .query(
        `SELECT v.id, v.memory_id, v.bits, m.user_id, m.session_id, m.document_id IS NULL AS turn
         FROM memory_vectors v JOIN memory m ON m.id = v.memory_id
         WHERE v.fingerprint = $fp AND v.id > $last AND v.dimensions = $dims ORDER BY v.id LIMIT $limit`,
      )
      .all({ fp: fingerprint, last: this.lastId, dims: dimensions, limit }) as {
      id: number;
      memory_id: number;
      bits: Uint8Array;
      user_id: string;
      session_id: string | null;
      turn: number;
    }[];
    const words = wordsFor(dimensions);
    for (const row of added) {
      const owner = ownerKey(row.user_id, row.turn ? (row.session_id ?? "") : "");
      index.put(row.memory_id, owner, wordsOf(row.bits, words));
      this.lastId = row.id;
    }
    return added.length === limit;
  }
}

/** A stored Float32 blob as floats (copied when SQLite's buffer is not 4-byte aligned). */
export function floatsOf(blob: Uint8Array): Float32Array {
  const aligned = blob.byteOffset % 4 === 0 ? blob : blob.slice();
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength >>> 2);
}

function wordsOf(blob: Uint8Array, words: number): Int32Array {
  const aligned = blob.byteOffset % 4 === 0 ? blob : blob.slice();
  return new Int32Array(aligned.buffer, aligned.byteOffset, words);
}
