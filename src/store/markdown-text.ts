/**
 * A message's text placed in the export's Markdown (docs/protocol.md, sessions.export): it keeps
 * its own Markdown, but nothing in it can end the message's place in the document. Outside code
 * fences a line that would start a heading (`#`, a setext `===`/`---` underline) or an HTML block
 * (`<`, which a `<!--` or `</details>` would use to swallow or close what follows) gets a
 * backslash, as does a `<` starting HTML inside a line (escapeTags); a fence the text leaves open
 * is closed at its end.
 */
export function markdownText(text: string): string {
  // Lines as a Markdown reader ends them: at \r\n, \r or \n (CommonMark), each ending kept. Split
  // at \n only, a Windows host's "```py\r" opened no fence here, and a lone \r's next line was
  // never looked at: a heading forged, or a fence left open over the rest of the export.
  const cr = text.includes("\r");
  // With a \r, the endings are kept between the lines (split's captures), each where it was.
  const parts = cr ? text.split(/(\r\n|\r|\n)/) : text.split("\n");
  let open: Fence | undefined;
  for (let i = 0; i < parts.length; i += cr ? 2 : 1) {
    const line = parts[i] as string;
    if (open) {
      if (closes(open, line)) open = undefined;
      continue;
    }
    open = opens(line);
    if (!open) parts[i] = escapeLine(line);
  }
  const body = parts.join(cr ? "" : "\n");
  return open ? `${body}\n${open.indent}${open.marker}` : body;
}

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

/** Headings and HTML blocks open at any indent a list item allows, so any indent is escaped. */
function escapeLine(line: string): string {
  return escapeTags(line).replace(/^(\s*)(#|<|=+\s*$|-+\s*$)/, "$1\\$2");
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
  if (!line.includes("<")) return line;
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
  return line.replace(SPECIAL, (m: string, at: number) => {
    if (at < kept) return m;
    if (m[0] === "`") {
      // An escaped backtick is a character; the run after it may still open a span.
      const from = escaped(at) ? 1 : 0;
      const n = m.length - from;
      const close = n > 0 ? closerAfter(runs, seen, n, at + m.length) : undefined;
      if (close !== undefined) kept = close + n;
      return m;
    }
    if (escaped(at)) return m;
    AUTOLINK.lastIndex = at;
    if (!AUTOLINK.test(line)) return "\\<";
    kept = AUTOLINK.lastIndex;
    return m;
  });
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
