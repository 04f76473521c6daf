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

/**
 * The tags that, opening the text, make it HTML: a page's own, its head's (a saved fragment often
 * opens with its styles or scripts) and the common block tags.
 */
const HTML_START =
  /^<(?:!doctype\s+html|html|head|body|meta|title|link|base|style|script|noscript|div|p|h[1-6]|article|section|header|footer|nav|main|aside|table|ul|ol)[\s/>]/i;
/** A Markdown heading line (ATX): `#` to `######`, then a space. */
const MD_HEADING = /^ {0,3}#{1,6}[ \t]+\S/m;

/**
 * HTML when the text opens (past white space, comments and an XML declaration: XHTML, an EPUB's
 * pages) with a doctype or a common tag;
 * Markdown when the name ends `.md`/`.markdown` or a line is a Markdown heading; else text.
 */
export function textFormat(text: string, name?: string): Exclude<DocumentFormat, "pdf"> {
  if (HTML_START.test(skipLeadingComments(text.slice(0, 4096)))) return "html";
  if (name && /\.(md|markdown)$/i.test(name)) return "markdown";
  return MD_HEADING.test(text.slice(0, 256 * 1024)) ? "markdown" : "text";
}

/** Past comments and processing instructions (`<?xml …?>`), which say nothing of the format. */
function skipLeadingComments(head: string): string {
  let rest = head.trimStart();
  for (;;) {
    const close = rest.startsWith("<!--") ? "-->" : rest.startsWith("<?") ? "?>" : undefined;
    if (close === undefined) return rest;
    const end = rest.indexOf(close, 2);
    if (end < 0) return rest;
    rest = rest.slice(end + close.length).trimStart();
  }
}
