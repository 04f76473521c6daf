import { basename } from "node:path";
import type { DocumentFormat, DocumentsAddParams, IndexProgress } from "../protocol/documents.ts";
import { CoreError } from "../protocol/errors.ts";
import { kvLeftText } from "../protocol/kv-left.ts";
import { documentErased, type PendingDocument } from "../store/document-store.ts";
import { sessionNotFound } from "../store/session-not-found.ts";
import type { Store } from "../store/store.ts";
import { titleOf } from "../store/title.ts";
import { abortable } from "../util/abortable.ts";
import { ByteBudget } from "../util/byte-budget.ts";
import { heldWhile } from "../util/held-while.ts";
import { logger } from "../util/logger.ts";
import { oneLine } from "../util/one-line.ts";
import type { Chunk } from "./chunk.ts";
import { ChunkPipeline } from "./chunk-pipeline.ts";
import { MAX_DOCUMENT_BYTES, MAX_READING_BYTES } from "./limits.ts";
import { readDocument } from "./read-document.ts";

/**
 * The seam for vectors (docs/agent.md "Documents"): the memory rows of a committed document's
 * chunks embedded, with progress; absent until an embedding model is wired. A failure leaves
 * the document found by FTS alone.
 */
export type EmbedChunks = (
  memoryRowIds: number[],
  onProgress: (done: number, total: number) => void,
  signal: AbortSignal,
) => Promise<void>;

export interface AddDeps {
  store: Store;
  /** A document's bytes (documents/document-file.ts), read up to `room` (its place in the reading budget). */
  readFile: (path: string, room?: number) => Promise<Uint8Array>;
  /** A document file's size before it is read (its place in the reading budget); 0 when unknown. */
  sizeOf?: (path: string) => Promise<number>;
  embedChunks?: EmbedChunks;
  /**
   * What taking a committed document out again owes beyond its rows (a cancel while it is
   * embedded): the saved KV states whose memory notes quote it (methods/documents.ts), as
   * `documents.delete` forgets them. Rejects naming a file it could not remove.
   */
  forget?: (documentId: string) => Promise<void>;
  /** The request's cancel. */
  signal: AbortSignal;
  /** Every step's progress (the method's `IndexBeat` sends the latest now and then). */
  progress: (p: IndexProgress) => void;
  /** The request's point of no return (RequestContext.settle): false when it was cancelled. */
  settle: () => boolean;
  now: () => number;
  newId: () => string;
}

export interface AddedDocument {
  document_id: string;
  name: string;
  format: DocumentFormat;
  chunks: number;
  bytes: number;
}

/** The documents read at once, by their sizes (MAX_READING_BYTES): the others wait their turn. */
const reading = new ByteBudget(MAX_READING_BYTES);

/**
 * `documents.add` (docs/agent.md "Documents"): the document read into chunks, the chunks stored
 * in batches unseen by recall, then the document's row committed (from then on it is found),
 * then its chunks embedded when an embedding model is wired. A cancel or an error before the
 * commit leaves nothing: the chunks stored so far are removed (and, should the core die first,
 * swept in the background once an hour old: store/orphan-sweep.ts). A `sessions.delete` or `users.delete` of its owner
 * while it runs wins (store/erasures.ts): the add stops, and no write of it lands after the erase.
 */
export async function addDocument(p: DocumentsAddParams, deps: AddDeps): Promise<AddedDocument> {
  const { store } = deps;
  const sessionId = p.session_id ?? "";
  if (p.session_id !== undefined) store.mustFind(p.user_id, p.session_id);
  const at = deps.now();
  const doc: PendingDocument = {
    documentId: deps.newId(),
    userId: p.user_id,
    sessionId,
    since: store.guard(() => store.conversations.erasureMark()),
    at,
  };
  const erased = new AbortController();
  const untrack = tracked(store, doc, () => erased.abort(documentErased(sessionId)));
  const signal = AbortSignal.any([deps.signal, erased.signal]);
  const progress = new Scaled(deps.progress);
  let committed = false;
  try {
    const source =
      p.path !== undefined ? { path: p.path, name: p.name } : { text: p.text ?? "", name: p.name };
    // A stat (and the read, read-document.ts) a cancel does not wait for: a file on a network or
    // cloud drive gone offline can hold it for minutes, or for good.
    const size =
      p.path !== undefined
        ? ((await abortable(deps.sizeOf?.(p.path) ?? Promise.resolve(0), signal)) ?? 0)
        : Buffer.byteLength(p.text ?? "", "utf8");
    // A file over the size limit is refused before a byte is read: it holds nothing. One whose
    // stat says 0 bytes (some file systems' files say so and have more) holds the most a file may.
    const unknown = p.path !== undefined && size === 0;
    const bytes = size > MAX_DOCUMENT_BYTES ? 0 : unknown ? MAX_DOCUMENT_BYTES : size;
    const admitted = await reading.acquire(bytes, signal);
    // Held until its read ends, past a cancel: the read fills the bytes whenever the drive answers.
    const room = heldWhile(admitted);
    // Never read past that room: a file that grew since its stat is refused (document-file.ts).
    const readFile = (path: string) => room.track(deps.readFile(path, bytes || MAX_DOCUMENT_BYTES));
    const doneReading = room.release;
    // Chunks are stored as they are made, on the store's chunk thread while the rest is read.
    const pipeline = new ChunkPipeline(store, doc, signal, deps.now);
    try {
      const read = await readDocument(source, {
        readFile,
        signal,
        onProgress: (pr) => {
          signal.throwIfAborted();
          progress.read(pr);
        },
        onChunks: (chunks) => pipeline.add(chunks),
      });
      await pipeline.finish((stored) => progress.stored(stored, read.chunks.length));
      doneReading();
      const meta = {
        name: nameOf(p, read),
        format: read.format,
        chunks: read.chunks.length,
        bytes: read.bytes,
      };
      // The commit's write waits for this core's erases (a large delete, the 0.1 import: minutes):
      // a cancel meanwhile ends the add, so the point of no return comes after that wait.
      await abortable(store.afterErases(), signal);
      // Without embedding, the commit is the end: a cancel after it finds the add finished.
      if (!deps.embedChunks && !deps.settle()) throw signal.reason;
      if (!(await store.write(() => store.documents.commit(doc, meta)))) throw sessionNotFound(sessionId);
      committed = true;
      if (deps.embedChunks) {
        await embed(doc, deps.embedChunks, deps, signal);
        // A documents.delete while it was embedded: the add must not answer for what is gone.
        if (!store.guard(() => store.documents.find(doc.userId, doc.documentId))) throw deletedMeanwhile(doc);
      }
      return { document_id: doc.documentId, ...meta };
    } finally {
      doneReading();
      // Not committed (a cancel, a failure), it answers now: its batches still out (each up to 5 s on
      // another core's lock) and the removal of what they stored go on behind; the store's stop waits.
      if (committed) await pipeline.settle();
      else store.documents.discarding.add(discardWhenSettled(store, doc, pipeline));
    }
  } finally {
    untrack();
  }
}

/**
 * The add watched for its owner's erase, and kept from the sweep of killed adds while it runs
 * (store/orphan-sweep.ts): one whose commit came past the hour had its chunks swept first. A
 * failed add's rows are its own discard's. Returns the end of both.
 */
function tracked(store: Store, doc: PendingDocument, onErase: () => void): () => void {
  const unwatch = store.erasing.watch(doc.userId, doc.sessionId, onErase);
  store.documents.adding.add(doc.documentId);
  return () => {
    unwatch();
    store.documents.adding.delete(doc.documentId);
  };
}

/**
 * The committed document's chunks embedded. A cancel (or an erase) here takes the document out
 * again, and any saved KV state quoting it, so a cancelled add leaves nothing; any other failure (the embedding model crashed) is
 * logged, and the document stays, found by FTS until its vectors are filled in.
 */
async function embed(doc: PendingDocument, embedChunks: EmbedChunks, deps: AddDeps, signal: AbortSignal) {
  const ids = deps.store.guard(() => deps.store.documents.chunkIds(doc.userId, doc.documentId));
  try {
    await embedChunks(ids, (done, total) => deps.progress({ phase: "embedding", done, total }), signal);
    if (signal.aborted || !deps.settle()) throw signal.reason;
  } catch (err) {
    if (!signal.aborted) {
      logger.warn(
        `document ${doc.documentId}: embedding failed (${(err as Error).message}); it is found by text search until its vectors are filled in`,
      );
      return;
    }
    await deps.store.deleteDocument(doc.userId, doc.documentId).catch((e: unknown) => {
      throw documentLeft(doc, e);
    });
    // Committed, it was recalled by the user's chats meanwhile: a KV state saved then quotes it.
    const left = await deps.forget?.(doc.documentId).then(
      () => undefined,
      (e: unknown) => kvLeft(doc, e),
    );
    throw left ?? signal.reason;
  }
}

/**
 * A cancelled add whose erase of its committed document was refused (the database locked past its
 * wait, a full disk): plain, it lost to the acknowledged cancel (protocol/dispatcher.ts) and the
 * host read `cancelled` while the document stayed, without the id to delete it with.
 */
function documentLeft(doc: PendingDocument, err: unknown): CoreError {
  const data = err instanceof CoreError ? err.data : undefined;
  if (!data)
    logger.warn(`document ${doc.documentId}: not erased after its cancel; ${(err as Error).message}`);
  return new CoreError(
    "cancelled",
    `the add was cancelled but document '${doc.documentId}' could not be erased (${err instanceof CoreError ? err.message : "see the core's log"}); send documents.delete with that document_id`,
    { ...data, reason: "document_left", document_id: doc.documentId },
  );
}

/**
 * A cancelled add's KV states quoting its document that could not be removed (methods/kv-erased.ts):
 * only logged, the add answered a plain `cancelled`, and the host, which never got the document's
 * id, could not send the `documents.delete` that tries them again; the quoted words stayed on
 * disk. Still `cancelled` (an acknowledged cancel ends its request so, protocol/dispatcher.ts), its
 * data naming the files as that delete's failure does, with the id to send it with. Else: logged.
 */
function kvLeft(doc: PendingDocument, err: unknown): CoreError | undefined {
  if (!(err instanceof CoreError) || !Array.isArray(err.data?.files)) {
    logger.warn(`document ${doc.documentId}: taken out after its cancel; ${(err as Error).message}`);
    return undefined;
  }
  return new CoreError(
    "cancelled",
    `the add was cancelled and document '${doc.documentId}' erased, but ${kvLeftText(err.data, " quoting it")}; send documents.delete with that document_id once they can be`,
    { ...err.data, reason: "kv_state_left", document_id: doc.documentId },
  );
}

/**
 * A document's name: the host's, else the file's, else the text's first words (HTML's, and a
 * file's, from its first chunk under its headings, never its markup). Never '': a citation shows
 * that for a document erased (docs/protocol.md "Citations").
 */
function nameOf(p: DocumentsAddParams, read: { format: DocumentFormat; chunks: Chunk[] }): string {
  // On one line: a host shows it in lists and citations, and a file's name may hold a line break
  // or an override that reorders what follows it.
  const given = oneLine(p.name ?? (p.path !== undefined ? basename(p.path) : ""));
  if (given.trim() !== "") return given;
  const first = read.chunks[0];
  if (p.text !== undefined && read.format !== "html") return titleOf(p.text);
  // A file whose name is all blanks or control characters has only its text to be named by.
  return first ? titleOf([...first.heading_path, first.text].join(" ")) : "";
}

function deletedMeanwhile(doc: PendingDocument): CoreError {
  return new CoreError("cancelled", `document '${doc.documentId}' was deleted while it was embedded`, {
    reason: "document_deleted",
    document_id: doc.documentId,
  });
}

/** No batch may land after the discard: it comes once every batch sent has ended. */
async function discardWhenSettled(
  store: Store,
  doc: PendingDocument,
  pipeline: ChunkPipeline,
): Promise<void> {
  await pipeline.settle();
  if (pipeline.started) await discard(store, doc);
}

/**
 * The rows of an add that never committed, removed a batch at a time off the loop, then the log
 * emptied so their text is in no file either (Store.discardAdd; on a full disk, which the add may
 * have filled itself, with the reserve's room); a failure is left to the sweep.
 */
async function discard(store: Store, doc: PendingDocument): Promise<void> {
  try {
    await store.discardAdd(doc.documentId);
  } catch (err) {
    store.orphans.expect(doc.at);
    logger.warn(
      `document ${doc.documentId}: its partial chunks are left to the sweep of unfinished adds (${(err as Error).message})`,
    );
  }
}

/**
 * `indexing` counts characters twice, once chunked and once stored, so it only rises: the
 * reader's characters as the first half, the chunks stored as the second.
 */
class Scaled {
  private chars = 0;

  constructor(private readonly send: (p: IndexProgress) => void) {}

  read(p: IndexProgress): void {
    if (p.phase !== "indexing") {
      this.send(p);
      return;
    }
    this.chars = p.total;
    this.send({ phase: "indexing", done: p.done, total: p.total * 2 });
  }

  stored(done: number, total: number): void {
    const t = Math.max(this.chars, total);
    this.send({ phase: "indexing", done: t + Math.round((t * done) / total), total: t * 2 });
  }
}
