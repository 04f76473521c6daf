import { z } from "zod";
import { afterLastSpace, wholeCharCut } from "../util/text-cut.ts";
import type { Block } from "./blocks.ts";
import { HEADING_CHARS, MAX_DOCUMENT_CHUNKS } from "./limits.ts";
import { documentProblem } from "./refusal.ts";
import { splitLong } from "./split-long.ts";

/**
 * A document's chunks (docs/agent.md "Documents"), the unit stored, recalled and cited: its
 * number from 0 in document order, its text, the headings it sits under (outermost first) and,
 * in a PDF, the page it is on (a chunk never spans two pages).
 */
export const ChunkSchema = z.object({
  index: z.number().int().nonnegative(),
  text: z.string().min(1),
  heading_path: z.array(z.string()),
  page: z.number().int().positive().optional(),
});
export type Chunk = z.infer<typeof ChunkSchema>;

/**
 * Blocks in, chunks out, one block at a time (pure; the reader gives the loop back between
 * slices): a heading starts a new chunk and changes the heading path; paragraphs join a chunk
 * while it stays within `target` characters; a new page starts a new chunk; a paragraph over
 * `target` becomes chunks of its own (`split-long.ts`). One chunk past `max` refuses the
 * document (`too_large`), as it is made: before it is stored.
 */
export class Chunker {
  private readonly chunks: Chunk[] = [];
  /** `carried`: a chunk has been made under it (its subsections' included). */
  private readonly headings: { level: number; text: string; carried: boolean }[] = [];
  private parts: string[] = [];
  private size = 0;
  private page: number | undefined;
  /** How many chunks `fresh` has handed out. */
  private handed = 0;

  constructor(
    private readonly target: number,
    private readonly max = MAX_DOCUMENT_CHUNKS,
  ) {}

  push(block: Block): void {
    if (block.kind === "heading") {
      this.flush();
      while ((this.headings.at(-1)?.level ?? 0) >= block.level) this.closeHeading();
      this.headings.push({ level: block.level, text: headingOf(block.text), carried: false });
      // Every chunk under it carries the heading: one past the bound is kept whole once, as text.
      if (block.text.length > HEADING_CHARS) this.push({ kind: "paragraph", text: block.text });
      return;
    }
    if (block.page !== this.page) this.flush();
    this.page = block.page;
    if (block.text.length > this.target) {
      this.flush();
      for (const piece of splitLong(block.text, this.target)) this.emit(piece);
      return;
    }
    if (this.size > 0 && this.size + 2 + block.text.length > this.target) this.flush();
    this.parts.push(block.text);
    this.size += (this.size > 0 ? 2 : 0) + block.text.length;
  }

  /** The chunks made since the last call (a caller storing them as they come). */
  fresh(): Chunk[] {
    const out = this.chunks.slice(this.handed);
    this.handed = this.chunks.length;
    return out;
  }

  /** The chunks, once every block is in. */
  finish(): Chunk[] {
    this.flush();
    while (this.headings.length > 0) this.closeHeading();
    return this.chunks;
  }

  /**
   * The innermost heading closed: one no chunk was made under (a section with no body, a
   * document of headings alone) is a chunk of its own text under the headings above it, so its
   * words are found, and an outline is not refused as having no text.
   */
  private closeHeading(): void {
    const heading = this.headings.pop();
    if (heading && !heading.carried) this.emit(heading.text);
  }

  private flush(): void {
    if (this.parts.length > 0) this.emit(this.parts.join("\n\n"));
    this.parts = [];
    this.size = 0;
  }

  private emit(text: string): void {
    if (this.chunks.length >= this.max)
      throw documentProblem(
        "too_large",
        `the document makes over ${this.max} chunks (its sections are many and small)`,
      );
    const chunk: Chunk = {
      index: this.chunks.length,
      text,
      heading_path: this.headings.map((h) => h.text),
    };
    if (this.page !== undefined) chunk.page = this.page;
    this.chunks.push(chunk);
    for (const h of this.headings) h.carried = true;
  }
}

/**
 * A heading as the chunks under it carry it: at most HEADING_CHARS, cut after a word where one
 * ends in its last quarter. Six levels of 60,000-character headings made every chunk 360,000
 * characters (the store grew 240× a file's size); now at most ~1,000 go before a chunk's text.
 */
function headingOf(text: string): string {
  if (text.length <= HEADING_CHARS) return text;
  const word = afterLastSpace(text, HEADING_CHARS, (HEADING_CHARS * 3) / 4);
  return `${text.slice(0, word > 0 ? word : wholeCharCut(text, HEADING_CHARS)).trimEnd()}…`;
}
