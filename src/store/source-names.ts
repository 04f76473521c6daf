import type { Database } from "bun:sqlite";
import { basename } from "node:path";
import type { Source } from "../protocol/sources.ts";
import { oneLine } from "../util/one-line.ts";
import { editedSince } from "./erasures.ts";
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
 * named, should the host give that id to a new session, by a conversation it never cited. A
 * session edited meanwhile (`replace_from`, `regenerate`) is left out too: its erased turns'
 * seqs are its new turns', which the citation would name (which seqs went is not recorded, so
 * a citation of a turn the edit kept goes as well: a race's cost, an answer citing less).
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
        (since === undefined || !editedSince(db, userId, s.id, since, true))),
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

/**
 * The user's other answers that cited the session (a past turn memory recalled) drop that
 * citation (docs/protocol.md "Citations"): its id is the host's own name for it, as telling as a
 * title, and a session given that id later would be named by a citation it never answered.
 * `fromSeq`: only the turns from that seq on, which an edit (`replace_from`, `regenerate`)
 * erased; their seqs are the new turns' next, and a citation left would name those as the source.
 * A copy set aside before answers kept sources has none to drop. At most `limit` answers (-1:
 * all); the number rewritten.
 */
export function dropCitations(
  db: Database,
  userId: string,
  sessionId: string,
  limit = -1,
  fromSeq = 0,
): number {
  if (!db.query("SELECT 1 FROM pragma_table_info('messages') WHERE name = 'sources'").get()) return 0;
  // `instr` first: every `sources` is JSON.stringify's, which writes the id as JSON.stringify(id),
  // so an answer citing it holds that text; json_each then parses only those (an edit's write lock
  // held 180-310 ms over 100k answers, half with sources; 50 ms so).
  const citing = db
    .query(
      `SELECT id, sources FROM messages WHERE user_id = ? AND sources IS NOT NULL
       AND instr(sources, ?) > 0 AND EXISTS
       (SELECT 1 FROM json_each(messages.sources) WHERE json_extract(value, '$.kind') = 'turn'
       AND json_extract(value, '$.id') = ? AND coalesce(json_extract(value, '$.chunk'), 0) >= ?) LIMIT ?`,
    )
    .all(userId, JSON.stringify(sessionId), sessionId, fromSeq, limit) as { id: number; sources: string }[];
  const update = db.query("UPDATE messages SET sources = ? WHERE id = ?");
  for (const row of citing) {
    const kept = (JSON.parse(row.sources) as { kind: string; id: string; chunk?: number }[]).filter(
      (s) => !(s.kind === "turn" && s.id === sessionId && (s.chunk ?? 0) >= fromSeq),
    );
    // An answer left citing nothing has no sources, as one whose recall found nothing.
    update.run(kept.length > 0 ? JSON.stringify(kept) : null, row.id);
  }
  return citing.length;
}
