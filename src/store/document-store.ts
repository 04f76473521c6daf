import type { Database } from "bun:sqlite";
import type { DocumentFormat } from "../protocol/documents.ts";
import { CoreError } from "../protocol/errors.ts";
import { Trailing } from "../util/trailing.ts";
import { forgettingRows } from "./db/fts-forget.ts";
import {
  DOCUMENT_COLUMNS,
  type DocumentPage,
  type DocumentPageAsk,
  type DocumentRow,
  type DocumentSummary,
  documentSummary,
  listDocuments,
} from "./document-pages.ts";
import { oweRewrite } from "./erase.ts";
import { erasedSince } from "./erasures.ts";
import { NEW_MEMORY_ID } from "./memory-ids.ts";

/** A document being added: what its rows carry before and after it is committed. */
export interface PendingDocument {
  documentId: string;
  userId: string;
  /** '' for the user's library, else the session it is attached to. */
  sessionId: string;
  /** The erase mark when the add began (store/erasures.ts): refused if the owner was erased since. */
  since: number;
  /** When its first chunk was stored (documents/chunk-pipeline.ts; until then, when the add began): its rows' time. */
  at: number;
}

/**
 * A chunk row never committed (its add cancelled, failed, or its core killed) is swept after
 * this long (store/orphan-sweep.ts): longer than any add takes (the text is bounded,
 * docs/agent.md "Documents"), so an add in progress in another core sharing the data folder is
 * never touched. Recall never sees such rows (store/memory-store.ts `RECALL_SCOPE`), and erasing
 * a user or session erases them too.
 */
export const ORPHAN_CHUNK_MS = 60 * 60 * 1000;

/**
 * Documents in the database (docs/agent.md "Documents"): a row in `documents` per document and
 * a `memory` row per chunk. The chunks go in first, in batches (each its own short write, so
 * the event loop is held only for one batch), unseen by recall until `commit` writes the
 * document's row; every write checks that the owner (user, or the attached session) was not
 * erased since the add began, so a delete wins over an add in flight.
 */
export class DocumentStore {
  /**
   * The removals of adds that answered first (cancelled or failed: their batches still out, then
   * what they stored): `Store.stop` waits for them, so nothing of such an add is left on disk.
   */
  readonly discarding = new Trailing();
  /**
   * The adds this core is running, by document id: never the sweep's (store/orphan-sweep.ts),
   * however old their rows. An add waits past the hour after its first batch (a long PDF, its
   * commit behind a large erase): swept, it committed a document whose chunks were gone.
   */
  readonly adding = new Set<string>();

  constructor(private readonly db: Database) {}

  /** One batch of chunks, in its own transaction. */
  addChunks(doc: PendingDocument, chunks: readonly { index: number; text: string }[]): void {
    const insert = this.db.query(
      `INSERT INTO memory (id, user_id, session_id, seq, source, root, text, at, document_id, chunk)
       VALUES (${NEW_MEMORY_ID}, ?, ?, NULL, ?, '', ?, ?, ?, ?)`,
    );
    this.db
      .transaction(() => {
        this.refuseIfErased(doc);
        for (const c of chunks)
          insert.run(
            doc.userId,
            doc.sessionId,
            `document:${doc.documentId}`,
            c.text,
            doc.at,
            doc.documentId,
            c.index,
          );
      })
      .immediate();
  }

  /**
   * The document's row: from now on recall finds its chunks. False when its session is gone
   * (the caller answers `session_not_found`).
   */
  commit(
    doc: PendingDocument,
    meta: { name: string; format: DocumentFormat; chunks: number; bytes: number },
  ): boolean {
    return this.db
      .transaction(() => {
        this.refuseIfErased(doc);
        if (doc.sessionId !== "") {
          const session = this.db
            .query("SELECT 1 FROM sessions WHERE user_id = ? AND session_id = ?")
            .get(doc.userId, doc.sessionId);
          if (!session) return false;
        }
        this.refuseIfSwept(doc, meta.chunks);
        this.db
          .query(
            `INSERT INTO documents (document_id, user_id, session_id, name, format, chunks, bytes, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            doc.documentId,
            doc.userId,
            doc.sessionId,
            meta.name,
            meta.format,
            meta.chunks,
            meta.bytes,
            doc.at,
          );
        return true;
      })
      .immediate();
  }

  /** Up to `limit` chunk rows of a document never committed, removed; how many went. */
  discard(documentId: string, limit: number): number {
    return this.db
      .transaction(
        () =>
          this.db
            .query(
              `DELETE FROM memory WHERE id IN (SELECT id FROM memory WHERE document_id = ? LIMIT ?)
               AND NOT EXISTS (SELECT 1 FROM documents WHERE document_id = ?)`,
            )
            .run(documentId, limit, documentId).changes,
      )
      .immediate();
  }

  /**
   * The documents with chunk rows but no `documents` row (an add in progress, or one a killed
   * core left) and when each add began, among the next `most` documents after `after`; `last`,
   * the last one read (where the next slice starts), null at the end. One index seek per
   * document (the chunks' rows share `document_id`), so it costs nothing like a scan of the
   * chunks, and a slice at a time, so a library of any size never holds the loop for all of it
   * (store/orphan-sweep.ts).
   */
  uncommitted(
    after: string,
    most: number,
  ): { found: { documentId: string; at: number }[]; last: string | null } {
    const next = this.db.query(
      "SELECT document_id, at FROM memory WHERE document_id IS NOT NULL AND document_id > ? ORDER BY document_id LIMIT 1",
    );
    const committed = this.db.query("SELECT 1 FROM documents WHERE document_id = ?");
    const found: { documentId: string; at: number }[] = [];
    let last = after;
    for (let read = 0; read < most; read++) {
      const row = next.get(last) as { document_id: string; at: number } | null;
      if (!row) return { found, last: null };
      last = row.document_id;
      if (!committed.get(last)) found.push({ documentId: last, at: row.at });
    }
    return { found, last };
  }

  /** The memory rows of a committed document's chunks, in chunk order (what embedding needs). */
  chunkIds(userId: string, documentId: string): number[] {
    return (
      this.db
        .query("SELECT id FROM memory WHERE user_id = ? AND document_id = ? ORDER BY chunk")
        .all(userId, documentId) as { id: number }[]
    ).map((r) => r.id);
  }

  /** A page of the user's documents, newest first: a session's attachments, or all of them. */
  list(userId: string, ask: DocumentPageAsk): DocumentPage {
    return listDocuments(this.db, userId, ask);
  }

  find(userId: string, documentId: string): DocumentSummary | undefined {
    const row = this.db
      .query(`SELECT ${DOCUMENT_COLUMNS} FROM documents WHERE user_id = ? AND document_id = ?`)
      .get(userId, documentId) as DocumentRow | null;
    return row ? documentSummary(row) : undefined;
  }

  /** A document and its chunks, in one transaction; false when the user has no such document. */
  delete(userId: string, documentId: string): boolean {
    return this.db
      .transaction(() => {
        const removed = deleteDocumentRows(this.db, userId, documentId);
        // The pages' rewrite (store/erase.ts) owed until the erase's settle does it.
        if (removed) oweRewrite(this.db);
        return removed;
      })
      .immediate();
  }

  /**
   * Every chunk still stored, counted on the chunks' index: another core sharing the data folder
   * sweeps an add's rows it takes for a killed core's once they are an hour old (an add that long,
   * or a machine asleep mid-add); committed, the document was listed with its chunks gone, found
   * by nothing. Refused: the add's own discard removes the rest, and the host sends it again.
   * The id is the add's own (random), so the index alone is read: with each row read for its
   * user too, a 50,000-chunk commit held the loop ~80 ms.
   */
  private refuseIfSwept(doc: PendingDocument, chunks: number): void {
    const stored = this.db
      .query("SELECT COUNT(*) AS n FROM memory WHERE document_id = ?")
      .get(doc.documentId) as { n: number };
    if (stored.n !== chunks)
      throw new CoreError(
        "internal_error",
        `${chunks - stored.n} of the document's ${chunks} chunks were removed while it was added (another core on the data folder took the add for a killed one): nothing of it was kept; send it again`,
      );
  }

  private refuseIfErased(doc: PendingDocument): void {
    if (erasedSince(this.db, doc.userId, doc.sessionId, doc.since)) throw documentErased(doc.sessionId);
  }
}

/**
 * A document's row and chunks, in the caller's transaction (the live database, or a copy set
 * aside: store/erase-copies.ts; one set aside before documents existed has none); whether it had one.
 */
export function deleteDocumentRows(db: Database, userId: string, documentId: string): boolean {
  if (!db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'").get())
    return false;
  const rows = db
    .query("SELECT COUNT(*) AS n FROM memory WHERE user_id = ? AND document_id = ?")
    .get(userId, documentId) as { n: number };
  forgettingRows(
    db,
    rows.n,
    () => db.query("DELETE FROM memory WHERE user_id = ? AND document_id = ?").run(userId, documentId),
    ["memory_fts"],
  );
  return (
    db.query("DELETE FROM documents WHERE user_id = ? AND document_id = ?").run(userId, documentId).changes >
    0
  );
}

/** An add's end when its owner was erased while it ran: nothing of the document was kept. */
export function documentErased(sessionId: string): CoreError {
  return sessionId === ""
    ? new CoreError(
        "cancelled",
        "the user's data was deleted while the document was added; nothing of it was kept",
        {
          reason: "user_deleted",
        },
      )
    : new CoreError(
        "cancelled",
        `session '${sessionId}' was deleted while the document was added; nothing of it was kept`,
        { reason: "session_deleted", session_id: sessionId },
      );
}

export function documentNotFound(documentId: string): CoreError {
  return new CoreError("invalid_request", `params.document_id: no document '${documentId}' for this user`, {
    field: "document_id",
    reason: "document_not_found",
  });
}
