import type { Database } from "bun:sqlite";
import { basename } from "node:path";
import type { Source } from "../protocol/sources.ts";
import { oneLine } from "../util/one-line.ts";
import { erasedSince } from "./erasures.ts";
import { readable } from "./folder-names.ts";

/**
 * A citation's `name`, looked up when it is shown (docs/protocol.md "Citations"): the session's
 * title, the document's name, the file's name. Stored answers keep their sources without names
 * (`withoutName`), so erasing a session or a document leaves no copy of its title or name in
 * another session's answers; a source whose session or document is gone is shown with `""`.
 */
export function sourceName(db: Database, userId: string, s: Pick<Source, "kind" | "id">): string {
  // A name that is not UTF-8 reads with U+FFFD for its bytes; the id keeps them (folder-names.ts).
  if (s.kind === "folder") return oneLine(readable(basename(s.id)));
  const row =
    s.kind === "document"
      ? db.query("SELECT name FROM documents WHERE user_id = ? AND document_id = ?").get(userId, s.id)
      : db.query("SELECT title AS name FROM sessions WHERE user_id = ? AND session_id = ?").get(userId, s.id);
  return (row as { name: string } | null)?.name ?? "";
}

/** Sources as an answer stores them: the name left to `sourceName` at read time. */
export function withoutName(sources: readonly Source[]): Omit<Source, "name">[] {
  return sources.map(({ kind, id, chunk, score }) => ({ kind, id, chunk, score }));
}

/**
 * Sources as a turn's commit stores them: without names, and without the past turns of a
 * session erased since the turn began (`since`, its erase mark), whose delete answered while
 * the turn ran. The delete dropped such citations from the answers stored before it
 * (store/erase.ts `dropCitations`); the answer committed after must not bring one back, to be
 * named, should the host give that id to a new session, by a conversation it never cited.
 */
export function storedSources(
  db: Database,
  userId: string,
  sources: readonly Source[] | undefined,
  since: number | undefined,
): string | null {
  const kept = (sources ?? []).filter(
    (s) =>
      s.kind !== "turn" ||
      (db.query("SELECT 1 FROM sessions WHERE user_id = ? AND session_id = ?").get(userId, s.id) !== null &&
        (since === undefined || !erasedSince(db, userId, s.id, since))),
  );
  return kept.length > 0 ? JSON.stringify(withoutName(kept)) : null;
}

/** Stored sources named again, each lookup done once per page. */
export function named(
  db: Database,
  userId: string,
  stored: Omit<Source, "name">[],
  cache: Map<string, string>,
): Source[] {
  return stored.map((s) => {
    const key = `${s.kind}\0${s.id}`;
    let name = cache.get(key);
    if (name === undefined) {
      name = sourceName(db, userId, s);
      cache.set(key, name);
    }
    return { kind: s.kind, id: s.id, name, chunk: s.chunk, score: s.score };
  });
}
