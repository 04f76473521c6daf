import type { CoreError } from "../protocol/errors.ts";
import {
  SessionsAttachmentParamsSchema,
  SessionsAttachmentResultSchema,
  SessionsDeleteParamsSchema,
  SessionsDeleteResultSchema,
  SessionsExportParamsSchema,
  SessionsExportResultSchema,
  SessionsGetParamsSchema,
  SessionsGetResultSchema,
  SessionsListParamsSchema,
  SessionsListResultSchema,
  SessionsRenameParamsSchema,
  SessionsRenameResultSchema,
  SessionsSearchParamsSchema,
  SessionsSearchResultSchema,
  UsersDeleteParamsSchema,
  UsersDeleteResultSchema,
} from "../protocol/sessions.ts";
import { ownStartTime } from "../runtime/proc-info.ts";
import { attachmentOf } from "../store/attachment-of.ts";
import { exportInline, exportToFile } from "../store/export-file.ts";
import { sessionNotFound } from "../store/session-not-found.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";
import { importedStore } from "./imported-store.ts";
import { kvErased } from "./kv-erased.ts";

// The host's view of its conversations (docs/protocol.md "Conversations"): each a thin call into
// the store, which validates nothing the params schema did not.

/** The user's sessions, newest first, a page at a time. */
export const sessionsList = defineMethod({
  name: "sessions.list",
  params: SessionsListParamsSchema,
  result: () => SessionsListResultSchema,
  run: async (p, _ctx, services) => (await importedStore(services)).list(p.user_id, p.limit, p.before),
});

/** One session and a page of its messages, newest page first, oldest message first within it. */
export const sessionsGet = defineMethod({
  name: "sessions.get",
  params: SessionsGetParamsSchema,
  result: () => SessionsGetResultSchema,
  run: async (p, _ctx, services) =>
    (await importedStore(services)).get(p.user_id, p.session_id, p.limit, p.before_seq),
});

export const sessionsRename = defineMethod({
  name: "sessions.rename",
  params: SessionsRenameParamsSchema,
  result: () => SessionsRenameResultSchema,
  run: async (p, _ctx, services) => ({
    session: await (await importedStore(services)).rename(p.user_id, p.session_id, p.title),
  }),
});

/** Erases the session for good: messages, checkpoint, memory, 0.1 files, set-aside databases, its saved KV state. */
export const sessionsDelete = defineMethod({
  name: "sessions.delete",
  params: SessionsDeleteParamsSchema,
  result: () => SessionsDeleteResultSchema,
  run: async (p, _ctx, services) => {
    const store = await importedStore(services);
    let live = true;
    try {
      store.mustFind(p.user_id, p.session_id);
    } catch (err) {
      // A store that cannot answer says nothing of the session's rows: nothing is erased.
      if ((err as CoreError).data?.reason !== "session_not_found") throw err;
      live = false;
    }
    // Not in the live database, it is erased still: a database set aside after damage may hold
    // it (the host knew it before the reset), and a delete sent again after one that could not
    // remove its saved KV state tries that again. The answer stays session_not_found.
    const { deleted, copies } = await store.deleteSession(p.user_id, p.session_id);
    await kvErased(services.forgetKv(p.user_id, p.session_id), services);
    if (!live && !deleted) throw sessionNotFound(p.session_id, copies);
    return { deleted: true as const, set_aside_copies: copies };
  },
});

export const sessionsSearch = defineMethod({
  name: "sessions.search",
  params: SessionsSearchParamsSchema,
  result: () => SessionsSearchResultSchema,
  // Cancellable: its scan (seconds on a huge database, or with the LIKE match) is answered at
  // once, and its thread stops it at its next page (store/chunk-thread.ts). A stop gives it its
  // grace (GRACED_BY_STOP), then ends it the same way.
  cancellable: true,
  run: async (p, ctx, services) => {
    const ended = AbortSignal.any([ctx.signal, ctx.stopping]);
    // Its wait for a 0.1 folder's import (minutes) is cancellable too: the import goes on.
    const store = await abortable(importedStore(services), ended);
    return { hits: await abortable(store.search(p.user_id, p.query, p.limit, ended), ended) };
  },
});

/** How many times an export starts over after an edit of its session under it. */
const EXPORT_ATTEMPTS = 3;

/** Inline up to 8 MiB, else to a file the host names (store/export-file.ts). */
export const sessionsExport = defineMethod({
  name: "sessions.export",
  params: SessionsExportParamsSchema,
  result: () => SessionsExportResultSchema,
  run: async (p, ctx, services) => {
    // An edit committed under the export replaced rows it had given: it starts again, a few times.
    for (let attempt = 1; ; attempt++) {
      const found = (await importedStore(services)).exportPieces(p.user_id, p.session_id, p.format);
      const pieces = untilStopped(found, ctx.stopping);
      try {
        if (p.path === undefined) return { format: p.format, content: await exportInline(pieces) };
        const dataDir = services.config().app.data_dir;
        const bytes = await exportToFile(p.path, pieces, dataDir, found.confirm, ownStartTime());
        return { format: p.format, path: p.path, bytes };
      } catch (err) {
        if ((err as CoreError).data?.reason !== "session_edited" || attempt === EXPORT_ATTEMPTS) throw err;
      }
    }
  },
});

/**
 * An export's pieces until the core's stop: `cancel` cannot reach an export, but a session of
 * hundreds of MiB, or a slow disk, must not hold the stop past the host's wait. Its reason is
 * thrown (`cancelled`); a file export's temp file is removed.
 */
async function* untilStopped(pieces: AsyncIterable<string>, stop: AbortSignal): AsyncGenerator<string> {
  for await (const piece of pieces) {
    stop.throwIfAborted();
    yield piece;
  }
}

/** One image of the user's messages with its bytes (docs/protocol.md#images); another user's id finds nothing. */
export const sessionsAttachment = defineMethod({
  name: "sessions.attachment",
  params: SessionsAttachmentParamsSchema,
  result: () => SessionsAttachmentResultSchema,
  // Its `data` a LongText: the writer writes it as the base64 string the schema says, in pieces.
  run: async (p, _ctx, services) => {
    const found = await attachmentOf(await importedStore(services), p.user_id, p.id);
    return { ...found, data: found.data as unknown as string };
  },
});

/** Everything of the user, erased for good; a user with nothing is not an error. */
export const usersDelete = defineMethod({
  name: "users.delete",
  params: UsersDeleteParamsSchema,
  result: () => UsersDeleteResultSchema,
  run: async (p, _ctx, services) => {
    const { deleted_sessions, copies } = await (await importedStore(services)).deleteUser(p.user_id);
    await kvErased(services.forgetKv(p.user_id), services);
    return { deleted_sessions, set_aside_copies: copies };
  },
});
