import type { Database } from "bun:sqlite";
import { CoreError } from "../protocol/errors.ts";
import { escapeTags, markdownPieces, PIECE_CHARS } from "./markdown-text.ts";
import type { SessionSummary, StoredMessage } from "./message-rows.ts";
import { messagesFrom } from "./session-pages.ts";

/** `sessions.export`'s formats: a document for a person, or the data for a program. */
export type ExportFormat = "markdown" | "json";

export function exportSession(
  format: ExportFormat,
  session: SessionSummary,
  messages: readonly StoredMessage[],
): string {
  const parts = exportParts(format, session);
  return `${parts.head}${parts.messages(messages, true)}${parts.tail(messages.length > 0)}`;
}

const ROLE_HEADINGS: Record<StoredMessage["role"], string> = {
  user: "User",
  assistant: "Assistant",
  tool: "Tool result",
  system: "System",
};

/**
 * The conversation as Markdown: a heading per message, tool calls and results in fenced
 * blocks (fences longer than any run of backticks inside, so no message can close one early),
 * message text and reasoning escaped so that none can forge a heading or swallow what follows.
 */
export function toMarkdown(session: SessionSummary, messages: readonly StoredMessage[]): string {
  return exportSession("markdown", session, messages);
}

/**
 * An export in pieces, so a big session is written a slice of messages at a time:
 * `head + messages(slice 1, true) + messages(slice 2, false) + … + tail(any)` is the whole
 * export, byte for byte what `exportSession` gives.
 */
export interface ExportParts {
  head: string;
  messages(slice: readonly StoredMessage[], first: boolean): string;
  /** `messages`' text in pieces: a huge message's Markdown is converted a piece at a time. */
  messagePieces(slice: readonly StoredMessage[], first: boolean): Iterable<string>;
  tail(any: boolean): string;
}

/**
 * An export's pieces, and `confirm`, which throws (`session_not_found`) once the session was
 * deleted since they were asked for, or `session_edited` once an edit replaced rows they gave: a
 * file export calls it right before its rename, after the last await, so a delete or an edit that
 * came while the tail was written or synced leaves no file holding what it erased.
 */
export type ExportPieces = AsyncGenerator<string> & { confirm: () => unknown };

/** An export's slice: small enough that building its text keeps the loop free (tens of ms). */
const EXPORT_SLICE_BYTES = 1024 * 1024;

/**
 * A session's export in pieces, a slice of about EXPORT_SLICE_BYTES of messages at a time with
 * the loop free between slices, so neither the whole session nor its text is ever held at once
 * (store/export-file.ts writes or gathers them). `find`, called again before each later slice
 * and at the end, throws once the session is gone: a session deleted meanwhile fails it, as does
 * an edit of rows already given (`session_edited`), checked at the end and by `confirm` too.
 * `read` runs a read on the store's connection.
 */
export function slicedExport(
  format: ExportFormat,
  userId: string,
  find: () => SessionSummary,
  read: <T>(work: (db: Database) => T) => T,
): ExportPieces {
  const seen: Seen = { find, read, userId };
  return Object.assign(slices(format, seen), { confirm: () => confirmed(seen) });
}

/** What an export has given: the last row, to tell an edit that replaced it since. */
interface Seen {
  find: () => SessionSummary;
  read: <T>(work: (db: Database) => T) => T;
  userId: string;
  given?: RowMark;
}

/** The session, found again, once the rows given are still its own. */
function confirmed(seen: Seen): SessionSummary {
  const session = seen.find();
  return seen.read((db) => unedited(db, seen, session));
}

/**
 * `session`, once the rows given are still the session's: an edit (replace_from, regenerate)
 * committed since the last slice replaced rows already given, and what follows would be another
 * conversation's tail, or the file would hold the words it erased.
 */
function unedited(db: Database, seen: Seen, session: SessionSummary): SessionSummary {
  const { given } = seen;
  if (given && !sameRow(rowMark(db, seen.userId, session.session_id, given.seq), given))
    throw sessionEdited(session.session_id);
  return session;
}

async function* slices(format: ExportFormat, seen: Seen): AsyncGenerator<string> {
  const { find, read, userId } = seen;
  const session = find();
  const parts = exportParts(format, session);
  yield parts.head;
  let from = 0;
  let any = false;
  for (let more = true; more; ) {
    if (any) find();
    const slice = read((db) => {
      unedited(db, seen, session);
      const page = messagesFrom(db, session, userId, from, EXPORT_SLICE_BYTES);
      const last = page.messages[page.messages.length - 1];
      if (last) seen.given = rowMark(db, userId, session.session_id, last.seq);
      return page;
    });
    more = slice.more;
    const last = slice.messages[slice.messages.length - 1];
    if (!last) break;
    // The loop freed every PIECE_CHARS or so of text too: one message of 8 MiB held it 0.3 s.
    let text: string[] = [];
    let size = 0;
    for (const piece of parts.messagePieces(slice.messages, !any)) {
      text.push(piece);
      size += piece.length;
      if (size < PIECE_CHARS) continue;
      yield text.join("");
      text = [];
      size = 0;
      await new Promise((r) => setImmediate(r));
    }
    if (text.length > 0) yield text.join("");
    any = true;
    from = last.seq + 1;
    await new Promise((r) => setImmediate(r));
  }
  confirmed(seen);
  yield parts.tail(any);
}

/** Which row a seq holds: a row an edit put in its place has another id or time. */
interface RowMark {
  seq: number;
  id: number;
  created_at: number;
}

function rowMark(db: Database, userId: string, sessionId: string, seq: number): RowMark | undefined {
  const row = db
    .query("SELECT id, created_at FROM messages WHERE user_id = ? AND session_id = ? AND seq = ?")
    .get(userId, sessionId, seq) as { id: number; created_at: number } | null;
  return row ? { seq, ...row } : undefined;
}

function sameRow(now: RowMark | undefined, then: RowMark): boolean {
  return now !== undefined && now.id === then.id && now.created_at === then.created_at;
}

/** Thrown by an export whose session was edited under it; `sessions.export` starts it again. */
export function sessionEdited(sessionId: string): CoreError {
  return new CoreError(
    "internal_error",
    `session '${sessionId}' was edited while it was exported, again and again; send the export again`,
    { reason: "session_edited" },
  );
}

export function exportParts(format: ExportFormat, session: SessionSummary): ExportParts {
  if (format === "json") {
    // JSON.stringify(…, null, 2)'s layout, nested by hand: JSON text has no raw newline inside a
    // string, so indenting after each newline indents lines only.
    const nest = (value: unknown, pad: string) => JSON.stringify(value, null, 2).replaceAll("\n", `\n${pad}`);
    const messages = (slice: readonly StoredMessage[], first: boolean) =>
      slice.map((m, i) => `${first && i === 0 ? "" : ","}\n    ${nest(m, "    ")}`).join("");
    return {
      head: `{\n  "session": ${nest(session, "  ")},\n  "messages": [`,
      messages,
      messagePieces: (slice, first) => [messages(slice, first)],
      tail: (any) => (any ? "\n  ]\n}\n" : "]\n}\n"),
    };
  }
  return {
    head: [
      `# ${oneLine(session.title) || session.session_id}`,
      "",
      // The agent's name is any text an imported 0.1 checkpoint held: one line, as the title.
      `Session \`${session.session_id}\` · agent ${oneLine(session.agent) || "?"} · started ${session.created_at}`,
    ].join("\n"),
    messages: (slice) => [...markdownSlice(slice)].join(""),
    messagePieces: markdownSlice,
    tail: () => "\n",
  };
}

/** The slice's Markdown: each message a newline and its parts, a newline between two. */
function* markdownSlice(slice: readonly StoredMessage[]): Generator<string> {
  for (const m of slice) {
    yield "\n";
    let between = "";
    for (const part of markdownMessage(m)) {
      yield between;
      between = "\n";
      if (typeof part === "string") yield part;
      else yield* part;
    }
  }
}

function markdownMessage(m: StoredMessage): (string | Iterable<string>)[] {
  const out: (string | Iterable<string>)[] = ["", `## ${ROLE_HEADINGS[m.role]} · ${m.created_at}`, ""];
  if (m.reasoning)
    out.push("<details><summary>Thinking</summary>", "", markdownPieces(m.reasoning), "", "</details>", "");
  if (m.role === "tool") out.push(fenced(m.content ?? ""));
  else if (m.content) out.push(markdownPieces(m.content));
  for (const call of m.tool_calls ?? []) {
    out.push("", `Tool call ${codeSpan(call.function.name)}:`, "", fenced(call.function.arguments, "json"));
  }
  return out;
}

/**
 * The longest run of backticks in `text`, at least `least`. A loop, not `Math.max(...runs)`: a
 * spread of a million runs (a huge message of backticks) throws RangeError in Bun.
 */
function longestTicks(text: string, least: number): number {
  let longest = least;
  for (const m of text.matchAll(/`+/g)) if (m[0].length > longest) longest = m[0].length;
  return longest;
}

function fenced(text: string, lang = ""): string {
  const longest = longestTicks(text, 2);
  const fence = "`".repeat(longest + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

/**
 * A tool call's name, which the model wrote (any text, a malformed call's too), as inline code on
 * one line: a newline in it would start a line of its own, a forged heading among them.
 */
function codeSpan(text: string): string {
  const flat = text.replace(/[\s\p{Cc}]+/gu, " ");
  const tick = "`".repeat(longestTicks(flat, 0) + 1);
  const pad = flat.startsWith("`") || flat.endsWith("`") ? " " : "";
  return `${tick}${pad}${flat}${pad}${tick}`;
}

/** A title or agent name on one line of the head, a tag in it escaped as in message text. */
function oneLine(text: string): string {
  return escapeTags(text.replace(/\s+/g, " ").trim());
}
