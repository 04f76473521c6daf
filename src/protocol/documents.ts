import { z } from "zod";

/**
 * The documents' wire pieces (docs/agent.md "Documents"); `documents.add`,
 * `documents.list` and `documents.delete` join them here when the methods come.
 */

/** What a document was read as: from its bytes, the name deciding only Markdown over text. */
export const DocumentFormatSchema = z.enum(["text", "markdown", "html", "pdf"]);
export type DocumentFormat = z.infer<typeof DocumentFormatSchema>;

/** How a text document's bytes were decoded (a PDF's text is pdf.js's). */
export const TextEncodingSchema = z.enum(["utf-8", "utf-16le", "utf-16be", "latin-1"]);
export type TextEncoding = z.infer<typeof TextEncodingSchema>;

/**
 * `index_progress`: `reading` counts a PDF's pages or the characters of a text read into
 * blocks, `indexing` the characters chunked (and later stored), `embedding` the chunks embedded.
 */
export const IndexProgressSchema = z.object({
  phase: z.enum(["reading", "indexing", "embedding"]),
  done: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
});
export type IndexProgress = z.infer<typeof IndexProgressSchema>;
