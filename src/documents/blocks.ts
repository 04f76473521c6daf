/**
 * A document read into blocks, the chunker's input (docs/agent.md "Documents"): headings and
 * paragraphs in order, each paragraph with the PDF page it is on. Markdown and plain text are
 * split here; HTML in `html-blocks.ts`, PDF pages in `pdf-pages.ts`.
 */
export type Block =
  | { kind: "heading"; level: number; text: string }
  | { kind: "paragraph"; text: string; page?: number };

/** A paragraph this long is handed on as it is, so no one step holds the loop for long. */
const MAX_PARAGRAPH_CHARS = 64 * 1024;

const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;

/**
 * Markdown's blocks: ATX and setext headings, paragraphs at blank lines, a fenced code block
 * kept whole (a `#` inside it is code, not a heading). The text keeps its own Markdown.
 */
export function* markdownBlocks(text: string): Generator<Block> {
  let lines: string[] = [];
  let size = 0;
  let fence: string | undefined;
  const flush = function* (): Generator<Block> {
    const body = lines.join("\n").trim();
    lines = [];
    size = 0;
    if (body) yield { kind: "paragraph", text: body };
  };
  for (const line of eachLine(text)) {
    if (fence) {
      lines.push(line);
      if (line.trimStart().startsWith(fence)) fence = undefined;
      continue;
    }
    const opened = FENCE.exec(line)?.[1];
    const atx = opened ? null : ATX.exec(line);
    const setext = !opened && lines.length === 1 ? SETEXT.exec(line) : null;
    if (atx) {
      yield* flush();
      const title = (atx[2] ?? "").trim();
      if (title) yield { kind: "heading", level: (atx[1] as string).length, text: title };
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
  yield* flush();
}

/** Plain text's blocks: paragraphs at blank lines, no headings. */
export function* textBlocks(text: string): Generator<Block> {
  let lines: string[] = [];
  let size = 0;
  for (const line of eachLine(text)) {
    if (line.trim() !== "") {
      lines.push(line);
      size += line.length + 1;
      if (size <= MAX_PARAGRAPH_CHARS) continue;
    }
    const body = lines.join("\n").trim();
    lines = [];
    size = 0;
    if (body) yield { kind: "paragraph", text: body };
  }
  const body = lines.join("\n").trim();
  if (body) yield { kind: "paragraph", text: body };
}

/** Lines without their ends (`\n`, `\r\n`, a lone `\r`), one at a time. */
export function* eachLine(text: string): Generator<string> {
  let start = 0;
  const ends = /\r\n|\n|\r/g;
  for (let m = ends.exec(text); m; m = ends.exec(text)) {
    yield text.slice(start, m.index);
    start = m.index + m[0].length;
  }
  if (start < text.length) yield text.slice(start);
}
