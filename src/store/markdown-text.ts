/**
 * A message's text placed in the export's Markdown (docs/protocol.md, sessions.export): it keeps
 * its own Markdown, but nothing in it can end the message's place in the document. Outside code
 * fences a line that would start a heading (`#`, a setext `===`/`---` underline) or an HTML block
 * (`<`, which a `<!--` or `</details>` would use to swallow or close what follows) gets a
 * backslash; a fence the text leaves open is closed at its end.
 */
export function markdownText(text: string): string {
  // Lines as a Markdown reader ends them: at \r\n, \r or \n (CommonMark), each ending kept. Split
  // at \n only, a Windows host's "```py\r" opened no fence here, and a lone \r's next line was
  // never looked at: a heading forged, or a fence left open over the rest of the export.
  const parts = text.split(/(\r\n|\r|\n)/);
  let out = "";
  let open: Fence | undefined;
  for (let i = 0; i < parts.length; i += 2) {
    const line = parts[i] as string;
    const end = parts[i + 1] ?? "";
    if (open) {
      if (closes(open, line)) open = undefined;
      out += line + end;
      continue;
    }
    open = opens(line);
    out += (open ? line : escapeLine(line)) + end;
  }
  if (open) out += `\n${open.indent}${open.marker}`;
  return out;
}

interface Fence {
  indent: string;
  /** The run that opened it: the closing run is the same character, at least as long. */
  marker: string;
}

function opens(line: string): Fence | undefined {
  // `s`: the info string is the rest of the line, a U+2028 in it too (no Markdown line ends there).
  const m = /^(\s*)(`{3,}|~{3,})(.*)$/s.exec(line);
  if (!m) return undefined;
  const [, indent = "", marker = "", info = ""] = m;
  // A backtick fence's info string holds no backtick (CommonMark): "```a`b" is inline code.
  if (marker[0] === "`" && info.includes("`")) return undefined;
  return { indent, marker };
}

function closes(fence: Fence, line: string): boolean {
  const m = /^\s*(`{3,}|~{3,})\s*$/.exec(line);
  return !!m?.[1] && m[1][0] === fence.marker[0] && m[1].length >= fence.marker.length;
}

/** Headings and HTML blocks open at any indent a list item allows, so any indent is escaped. */
function escapeLine(line: string): string {
  return line.replace(/^(\s*)(#|<|=+\s*$|-+\s*$)/, "$1\\$2");
}
