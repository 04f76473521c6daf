import type { DocumentFormat } from "../protocol/documents.ts";

/**
 * A document's format from its bytes, never its name (docs/agent.md "Documents"): `%PDF-` at
 * the start (past white space) is a PDF; further in, a text that quotes it stays text. Anything else is decoded as text
 * first (`decode.ts`), then `textFormat` tells HTML, Markdown and plain text apart.
 */
export function isPdf(bytes: Uint8Array): boolean {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024));
  return head.toString("latin1").trimStart().startsWith("%PDF-");
}

/** The tags that, opening the text, make it HTML. */
const HTML_START =
  /^<(?:!doctype\s+html|html|head|body|meta|title|div|p|h[1-6]|article|section|table|ul|ol)[\s/>]/i;
/** A Markdown heading line (ATX): `#` to `######`, then a space. */
const MD_HEADING = /^ {0,3}#{1,6}[ \t]+\S/m;

/**
 * HTML when the text opens (past white space and comments) with a doctype or a common tag;
 * Markdown when the name ends `.md`/`.markdown` or a line is a Markdown heading; else text.
 */
export function textFormat(text: string, name?: string): Exclude<DocumentFormat, "pdf"> {
  if (HTML_START.test(skipLeadingComments(text.slice(0, 4096)))) return "html";
  if (name && /\.(md|markdown)$/i.test(name)) return "markdown";
  return MD_HEADING.test(text.slice(0, 256 * 1024)) ? "markdown" : "text";
}

function skipLeadingComments(head: string): string {
  let rest = head.trimStart();
  while (rest.startsWith("<!--")) {
    const end = rest.indexOf("-->");
    if (end < 0) return rest;
    rest = rest.slice(end + 3).trimStart();
  }
  return rest;
}
