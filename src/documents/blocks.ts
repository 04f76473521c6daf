import { afterLastSpace, wholeCharCut } from "../util/text-cut.ts";
import { SLICE_CHARS } from "./limits.ts";

/**
 * A document read into blocks, the chunker's input (docs/agent.md "Documents"): headings and
 * paragraphs in order, each paragraph with the PDF page it is on. Markdown and plain text are
 * split here; HTML in `html-blocks.ts`, PDF pages in `pdf-pages.ts`.
 */
export type Block =
  | { kind: "heading"; level: number; text: string }
  | { kind: "paragraph"; text: string; page?: number };

/**
 * A scan's output: blocks, and between them how far into the text it has got (a number), at
 * least every SLICE_CHARS scanned, so the reader gives the loop back on characters scanned:
 * blank lines and empty headings make no block (docs/agent.md "Off the main loop").
 */
export type Scanned = Block | number;

/** A paragraph (and a line) this long is handed on as it is, so no one step holds the loop. */
export const MAX_PARAGRAPH_CHARS = 64 * 1024;

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;

const HASH = 35;
const isBlank = (c: number) => c === 32 || c === 9;

/**
 * An ATX heading's level and title (CommonMark: up to three spaces, one to six `#`, then a space,
 * a tab or the line's end; a closing run of `#` after a space or tab is not the title), else
 * null. Read in one pass: the regex it replaces backtracked quadratically on a `#` line of
 * spaces (4.6 s for one line of 64 Ki characters; a hostile review).
 */
export function atxHeading(line: string): { level: number; title: string } | null {
  let i = 0;
  while (i < 3 && line.charCodeAt(i) === 32) i++;
  let level = 0;
  while (level < 7 && line.charCodeAt(i + level) === HASH) level++;
  if (level === 0 || level > 6) return null;
  i += level;
  if (i < line.length && !isBlank(line.charCodeAt(i))) return null;
  let end = line.length;
  while (end > i && isBlank(line.charCodeAt(end - 1))) end--;
  let closing = end;
  while (closing > i && line.charCodeAt(closing - 1) === HASH) closing--;
  if (closing < end && (closing === i || isBlank(line.charCodeAt(closing - 1)))) end = closing;
  return { level, title: line.slice(i, end).trim() };
}

/** Markdown's blocks alone (see `markdownScan`). */
export function* markdownBlocks(text: string): Generator<Block> {
  for (const item of markdownScan(text)) if (typeof item !== "number") yield item;
}

/** Plain text's blocks alone (see `textScan`). */
export function* textBlocks(text: string): Generator<Block> {
  for (const item of textScan(text)) if (typeof item !== "number") yield item;
}

/**
 * Markdown's blocks: ATX and setext headings, paragraphs at blank lines, a fenced code block
 * kept whole up to MAX_PARAGRAPH_CHARS (a `#` inside it is code, not a heading), past that
 * handed on in pieces. The text keeps its own Markdown.
 */
export function* markdownScan(text: string): Generator<Scanned> {
  let lines: string[] = [];
  let size = 0;
  let fence: string | undefined;
  const flush = function* (): Generator<Block> {
    const body = lines.join("\n").trim();
    lines = [];
    size = 0;
    if (body) yield { kind: "paragraph", text: body };
  };
  const at = new LinePosition();
  for (const line of eachLine(text, at)) {
    if (fence) {
      lines.push(line);
      size += line.length + 1;
      if (line.trimStart().startsWith(fence)) fence = undefined;
      // At a closing line too: fences opening and closing line after line never reach the
      // flush below (a fence is open there) and would gather the whole text as one paragraph.
      if (size > MAX_PARAGRAPH_CHARS) yield* flush();
    } else {
      const opened = FENCE.exec(line)?.[1];
      const atx = opened ? null : atxHeading(line);
      const setext = !opened && lines.length === 1 ? SETEXT.exec(line) : null;
      if (atx) {
        yield* flush();
        if (atx.title) yield { kind: "heading", level: atx.level, text: atx.title };
      } else if (setext) {
        const title = (lines[0] as string).trim();
        lines = [];
        size = 0;
        yield { kind: "heading", level: setext[1]?.startsWith("=") ? 1 : 2, text: title };
      } else if (!opened && line.trim() === "") {
        yield* flush();
      } else {
        if (opened) fence = opened;
        lines.push(line);
        size += line.length + 1;
        if (size > MAX_PARAGRAPH_CHARS && !fence) yield* flush();
      }
    }
    if (at.marked()) yield at.next;
  }
  yield* flush();
}

/** Plain text's blocks: paragraphs at blank lines, no headings. */
export function* textScan(text: string): Generator<Scanned> {
  let lines: string[] = [];
  let size = 0;
  const at = new LinePosition();
  for (const line of eachLine(text, at)) {
    if (line.trim() !== "") {
      lines.push(line);
      size += line.length + 1;
    }
    if (line.trim() === "" || size > MAX_PARAGRAPH_CHARS) {
      const body = lines.join("\n").trim();
      lines = [];
      size = 0;
      if (body) yield { kind: "paragraph", text: body };
    }
    if (at.marked()) yield at.next;
  }
  const body = lines.join("\n").trim();
  if (body) yield { kind: "paragraph", text: body };
}

/** Where `eachLine` is: `next` is where the text after the line it last gave starts. */
export class LinePosition {
  next = 0;
  private mark = SLICE_CHARS;

  /** Whether another SLICE_CHARS have been scanned since it last said so. */
  marked(): boolean {
    if (this.next < this.mark) return false;
    this.mark = this.next + SLICE_CHARS;
    return true;
  }
}

/**
 * Lines without their ends (`\n`, `\r\n`, a lone `\r`), one at a time; a line longer than
 * MAX_PARAGRAPH_CHARS comes in pieces, cut at its last white space in the piece's second half,
 * else at the limit (never inside a surrogate pair), so no one line holds the loop.
 */
export function* eachLine(text: string, at = new LinePosition()): Generator<string> {
  const ends = /\r\n|\n|\r/g;
  let start = 0;
  while (start < text.length) {
    ends.lastIndex = start;
    const m = ends.exec(text);
    const end = m ? m.index : text.length;
    // One search to the line's end, then its pieces: never a search per piece.
    while (end - start > MAX_PARAGRAPH_CHARS) {
      const cut = cutLine(text, start, start + MAX_PARAGRAPH_CHARS);
      at.next = cut;
      yield text.slice(start, cut);
      start = cut;
    }
    at.next = m ? end + m[0].length : end;
    yield text.slice(start, end);
    start = at.next;
  }
}

/** Where to cut `text` between `start` and `limit`: see `eachLine`. */
function cutLine(text: string, start: number, limit: number): number {
  const space = afterLastSpace(text, limit, start + (limit - start) / 2);
  return space >= 0 ? space : wholeCharCut(text, limit);
}
