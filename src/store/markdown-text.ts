/**
 * A message's text placed in the export's Markdown (docs/protocol.md, sessions.export): it keeps
 * its own Markdown, but nothing in it can end the message's place in the document. Outside code
 * fences a line that would start a heading (`#`, a setext `===`/`---` underline) or an HTML block
 * (`<`, which a `<!--` or `</details>` would use to swallow or close what follows) gets a
 * backslash, as does a `<` starting HTML inside a line (escapeTags); a fence the text leaves open
 * is closed at its end.
 */
export function markdownText(text: string): string {
  return [...markdownPieces(text)].join("");
}

/**
 * Input characters converted between two of `markdownPieces`' pieces: an 8 MiB message, one
 * line or millions, took 0.3 s to convert whole, in one export slice on the main loop.
 */
export const PIECE_CHARS = 256 * 1024;

/**
 * `markdownText` in pieces, each of about PIECE_CHARS of the input (a long line's too), whose
 * concatenation is `markdownText`'s text: an export frees the loop between them.
 */
export function* markdownPieces(text: string): Generator<string> {
  // Lines as a Markdown reader ends them: at \r\n, \r or \n (CommonMark), each ending kept. Split
  // at \n only, a Windows host's "```py\r" opened no fence here, and a lone \r's next line was
  // never looked at: a heading forged, or a fence left open over the rest of the export.
  const cr = text.includes("\r");
  let open: Fence | undefined;
  let out: string[] = [];
  let done = 0;
  for (let at = 0; at >= 0; ) {
    const next = nextLine(text, at, cr);
    const end = next < 0 ? text.length : next - (next - at >= 2 && text.startsWith("\r\n", next - 2) ? 2 : 1);
    const line = text.slice(at, end);
    if (open) {
      if (closes(open, line)) open = undefined;
      out.push(line);
    } else {
      open = opens(line);
      if (open) out.push(line);
      else if (line.length <= PIECE_CHARS) out.push(escapeHead(escapeTags(line)));
      else
        for (const piece of escapeLine(line)) {
          out.push(piece);
          // A piece of a long line: PIECE_CHARS of it converted.
          if (piece.length >= PIECE_CHARS) {
            yield out.join("");
            out = [];
            done = -line.length;
          }
        }
    }
    if (next >= 0) out.push(end + 1 === next ? (text[end] as string) : "\r\n");
    done += next < 0 ? line.length : next - at;
    if (done >= PIECE_CHARS) {
      yield out.join("");
      out = [];
      done = 0;
    }
    at = next;
  }
  if (open) out.push(`\n${open.indent}${open.marker}`);
  yield out.join("");
}

/** Where the line after the one at `at` begins (-1: none). Without a \r, \n alone is looked for: as fast as before. */
function nextLine(text: string, at: number, cr: boolean): number {
  if (!cr) {
    const n = text.indexOf("\n", at);
    return n < 0 ? -1 : n + 1;
  }
  LINE_END.lastIndex = at;
  return LINE_END.exec(text) ? LINE_END.lastIndex : -1;
}

const LINE_END = /\r\n|\r|\n/g;

interface Fence {
  indent: string;
  /** The run that opened it: the closing run is the same character, at least as long. */
  marker: string;
}

function opens(line: string): Fence | undefined {
  // Up to three spaces in (CommonMark): four make indented code or a paragraph's text, no fence,
  // and a heading after it is real. `s`: the info string is the rest of the line, a U+2028 too.
  const m = /^( {0,3})(`{3,}|~{3,})(.*)$/s.exec(line);
  if (!m) return undefined;
  const [, indent = "", marker = "", info = ""] = m;
  // A backtick fence's info string holds no backtick (CommonMark): "```a`b" is inline code.
  if (marker[0] === "`" && info.includes("`")) return undefined;
  return { indent, marker };
}

function closes(fence: Fence, line: string): boolean {
  // As a reader closes it: up to three spaces in, only spaces or tabs after. Taken for closed
  // otherwise, the fence was left open over every later message.
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return !!m?.[1] && m[1][0] === fence.marker[0] && m[1].length >= fence.marker.length;
}

/**
 * Headings and HTML blocks open at any indent a list item allows, so any indent is escaped; in
 * tagPieces' pieces, the head in the first (a piece ends after a backtick run or a `<`, so a
 * first piece is never a whole `===` or `---` line when the line goes on).
 */
function* escapeLine(line: string): Generator<string> {
  let first = true;
  for (const piece of tagPieces(line)) {
    yield first ? escapeHead(piece) : piece;
    first = false;
  }
}

function escapeHead(line: string): string {
  return line.replace(/^(\s*)(#|<|=+\s*$|-+\s*$)/, "$1\\$2");
}

/** An autolink (`<https://…>`, `<a@b.c>`): a link, not raw HTML, so kept as it is. */
const AUTOLINK = /<(?:[A-Za-z][A-Za-z0-9.+-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[A-Za-z0-9.-]+)>/y;

/**
 * A `<` with a letter, `/`, `!` or `?` after it starts raw HTML, which a Markdown reader hands the
 * page mid-line too (`<details>` folded every later message away, `</details>` ended the Thinking
 * block): escaped, unless in a code span, an autolink or after a backslash. Code spans are seen
 * on their line only (one across lines gets a visible backslash). One pass: each opening backtick
 * run's closer (the next run of its length) is found from lists of runs by length, so a line of
 * thousands of unclosed runs is not scanned again for each.
 */
export function escapeTags(line: string): string {
  return line.includes("<") ? [...tagPieces(line)].join("") : line;
}

/**
 * escapeTags' text in pieces of about PIECE_CHARS of the line, each a window of it converted
 * with what the windows before left (the spans' ends, the runs): a window ends neither inside a
 * backtick run nor right after a `<`, so each match lies in one window as in the whole line.
 */
function* tagPieces(line: string): Generator<string> {
  if (!line.includes("<")) {
    yield line;
    return;
  }
  const runs = backtickRuns(line);
  const seen = new Map<number, number>();
  // An odd run of backslashes before a character escapes it.
  const escaped = (at: number) => {
    let n = 0;
    while (line.charCodeAt(at - 1 - n) === 92) n++;
    return n % 2 === 1;
  };
  // The end of the code span or autolink a match lies in: kept as it is.
  let kept = 0;
  const one = (m: string, at: number): string => {
    if (at < kept) return m;
    if (m[0] === "`") {
      // An escaped backtick is a character; the run after it may still open a span.
      const n = m.length - (escaped(at) ? 1 : 0);
      const close = n > 0 ? closerAfter(runs, seen, n, at + m.length) : undefined;
      if (close !== undefined) kept = close + n;
      return m;
    }
    if (escaped(at)) return m;
    AUTOLINK.lastIndex = at;
    if (!AUTOLINK.test(line)) return "\\<";
    kept = AUTOLINK.lastIndex;
    return m;
  };
  for (let from = 0; from < line.length; ) {
    let to = Math.min(line.length, from + PIECE_CHARS);
    while (
      to < line.length &&
      ((line.charCodeAt(to) === 96 && line.charCodeAt(to - 1) === 96) || line.charCodeAt(to - 1) === 60)
    )
      to++;
    const start = from;
    yield line.slice(from, to).replace(SPECIAL, (m: string, at: number) => one(m, start + at));
    from = to;
  }
}

/** What escapeTags looks at: a backtick run, a `<` that would start a tag, a comment or an instruction. */
const SPECIAL = /`+|<(?=[A-Za-z/!?])/g;

/** The starts of the line's backtick runs, by run length, in order. */
function backtickRuns(line: string): Map<number, number[]> {
  const runs = new Map<number, number[]>();
  for (let i = line.indexOf("`"); i >= 0; ) {
    let n = 1;
    while (line.charCodeAt(i + n) === 96) n++;
    const list = runs.get(n);
    if (list) list.push(i);
    else runs.set(n, [i]);
    i = line.indexOf("`", i + n);
  }
  return runs;
}

/** The first run of length `n` at or after `from`; `seen` keeps each length's place, as `from` only grows. */
function closerAfter(
  runs: Map<number, number[]>,
  seen: Map<number, number>,
  n: number,
  from: number,
): number | undefined {
  const starts = runs.get(n);
  if (!starts) return undefined;
  let k = seen.get(n) ?? 0;
  while (k < starts.length && (starts[k] as number) < from) k++;
  seen.set(n, k);
  return starts[k];
}
