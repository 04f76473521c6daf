import { randomBytes } from "node:crypto";
import { addDocument } from "../documents/add-document.ts";
import { documentFileSize, readDocumentFile } from "../documents/document-file.ts";
import { IndexBeat } from "../documents/index-beat.ts";
import { refuseOwnFile } from "../documents/own-files.ts";
import {
  DocumentsAddEventFields,
  DocumentsAddParamsSchema,
  DocumentsAddResultSchema,
  DocumentsDeleteParamsSchema,
  DocumentsDeleteResultSchema,
  DocumentsListParamsSchema,
  DocumentsListResultSchema,
} from "../protocol/documents.ts";
import { documentNotFound } from "../store/document-store.ts";
import type { Store } from "../store/store.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";
import { importedStore } from "./imported-store.ts";
import { kvErased } from "./kv-erased.ts";
import type { Services } from "./services.ts";

// Documents a user hands the assistant (docs/protocol.md "Documents"): a session's attachments
// and the user's library, each method a thin call into documents/ and the store.

/**
 * The store; when a session is named, once a 0.1 folder's import is done (Store.whenImported):
 * a session whose unit is not imported yet is not found.
 */
function storeFor(services: Services, sessionId: string | undefined): Store | Promise<Store> {
  return sessionId === undefined ? services.store() : importedStore(services);
}

/** Reads a document (a path or text), stores its chunks, commits it; progress while it runs. Cancellable. */
export const documentsAdd = defineMethod({
  name: "documents.add",
  cancellable: true,
  params: DocumentsAddParamsSchema,
  result: () => DocumentsAddResultSchema,
  events: () => DocumentsAddEventFields,
  run: async (params, ctx, services) => {
    // Cancelled while this module loaded (docs/protocol.md#cancel): the database is not opened for it.
    ctx.signal.throwIfAborted();
    const beat = new IndexBeat((p) => ctx.emit("index_progress", p));
    try {
      // Its wait for a 0.1 folder's import (minutes) is cancellable too: the import goes on.
      const store = await abortable(Promise.resolve(storeFor(services, params.session_id)), ctx.signal);
      return await addDocument(params, {
        store,
        readFile: async (path, room) => {
          const { config, file } = services.loadedConfig();
          await refuseOwnFile(path, { dataDir: config.app.data_dir, configFile: file });
          return await readDocumentFile(path, room);
        },
        sizeOf: documentFileSize,
        embedChunks: services.embedChunks,
        forget: (id) => kvErased(services.forgetKvSource(params.user_id, `document:${id}`), services),
        signal: ctx.signal,
        progress: (p) => beat.update(p),
        settle: () => ctx.settle(),
        now: Date.now,
        newId: () => `doc-${randomBytes(8).toString("hex")}`,
      });
    } finally {
      beat.stop();
    }
  },
});

/** The user's documents, newest first, a page at a time; with `session_id`, that session's attachments only. */
export const documentsList = defineMethod({
  name: "documents.list",
  params: DocumentsListParamsSchema,
  result: () => DocumentsListResultSchema,
  run: async (p, _ctx, services) => {
    const store = await storeFor(services, p.session_id);
    if (p.session_id !== undefined) store.mustFind(p.user_id, p.session_id);
    const ask = { sessionId: p.session_id, limit: p.limit, before: p.before };
    return store.guard(() => store.documents.list(p.user_id, ask));
  },
});

/**
 * A document and its chunks erased for good, and every saved KV state and prompt record whose
 * memory notes quote it (docs/agent.md#prompt-reuse): the model reads it no more. A state that
 * could not be removed fails the delete naming it, and a delete sent again tries it again, as
 * `sessions.delete` does (kv-erased.ts).
 */
export const documentsDelete = defineMethod({
  name: "documents.delete",
  params: DocumentsDeleteParamsSchema,
  result: () => DocumentsDeleteResultSchema,
  run: async (p, _ctx, services) => {
    const source = `document:${p.document_id}`;
    if (!(await services.store().deleteDocument(p.user_id, p.document_id))) {
      await kvErased(services.forgetKvSource(p.user_id, source), services);
      throw documentNotFound(p.document_id);
    }
    await kvErased(services.forgetKvSource(p.user_id, source), services);
    return { deleted: true as const };
  },
});
