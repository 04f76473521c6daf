import type { DocumentFormat, IndexProgress, TextEncoding } from "../protocol/documents.ts";
import { abortable } from "../util/abortable.ts";
import { nextTurn } from "../util/next-turn.ts";
import { type Block, markdownScan, type Scanned, textScan } from "./blocks.ts";
import { type Chunk, Chunker } from "./chunk.ts";
import { decodeText } from "./decode.ts";
import { isPdf, textFormat } from "./format.ts";
import { HtmlBlocks } from "./html-blocks.ts";
import { CHUNK_TARGET_CHARS, MAX_TEXT_CHARS, SLICE_CHARS } from "./limits.ts";
import { pdfPages } from "./pdf-pages.ts";
import { documentProblem, tooMuchText } from "./refusal.ts";

/**
 * A document read into chunks (docs/agent.md "Documents"): its bytes (from a path through the
 * injected `readFile`, or text handed in), its format from the bytes, its text extracted and
 * chunked on its structure, the event loop given back every slice. `onProgress` hears `reading`
 * (a PDF's pages; a file's bytes once read) and `indexing` (characters chunked); the method
 * throttles what it sends. Storing the chunks is the caller's.
 */
export type DocumentSource = { path: string; name?: string } | { text: string; name?: string };

export interface ReadOptions {
  readFile: (path: string) => Promise<Uint8Array>;
  /** Ends a PDF's read at once, waiting for its thread or mid-page (`pdf-pages.ts`). */
  signal?: AbortSignal;
  onProgress?: (progress: IndexProgress) => void;
  /** CHUNK_TARGET_CHARS unless a test says otherwise. */
  target?: number;
  /**
   * Chunks as they are made, at the breaks between slices (instead of the loop's turn there), so
   * the caller can store them while the rest is read; the result still has them all.
   */
  onChunks?: (chunks: Chunk[]) => Promise<void>;
}

export interface DocumentRead {
  format: DocumentFormat;
  /** A text file's encoding; absent for a PDF and for text handed in. */
  encoding?: TextEncoding;
  bytes: number;
  /** A PDF's pages. */
  pages?: number;
  chunks: Chunk[];
}

export async function readDocument(source: DocumentSource, opts: ReadOptions): Promise<DocumentRead> {
  const progress = opts.onProgress ?? (() => {});
  const chunker = new Chunker(opts.target ?? CHUNK_TARGET_CHARS);
  const onChunks = opts.onChunks;
  // A break between slices: the chunks made so far handed on, else a turn of the loop.
  const pause = async (turn: boolean) => {
    const fresh = onChunks ? chunker.fresh() : [];
    if (onChunks && fresh.length > 0) await onChunks(fresh);
    else if (turn) await nextTurn();
  };
  let read: Omit<DocumentRead, "chunks">;
  if ("text" in source) {
    read = await readText(source.text, undefined, source.name, chunker, progress, pause);
    read.bytes = Buffer.byteLength(source.text, "utf8");
  } else {
    // Not waited for past a cancel: a file on a drive gone offline may never answer.
    const reading = opts.readFile(source.path);
    const bytes = await (opts.signal ? abortable(reading, opts.signal) : reading);
    progress({ phase: "reading", done: bytes.byteLength, total: bytes.byteLength });
    const name = source.name ?? source.path;
    read = isPdf(bytes)
      ? await readPdf(bytes, chunker, progress, pause, opts.signal)
      : await readBytes(bytes, name, chunker, progress, pause);
  }
  const chunks = chunker.finish();
  if (chunks.length === 0) throw documentProblem("no_text", "the document has no text to index");
  await pause(false);
  return { ...read, chunks };
}

type Progress = (progress: IndexProgress) => void;
type Pause = (turn: boolean) => Promise<void>;

async function readBytes(
  bytes: Uint8Array,
  name: string,
  chunker: Chunker,
  progress: Progress,
  pause: Pause,
) {
  const { text, encoding } = await decodeText(bytes);
  const read = await readText(text, encoding, name, chunker, progress, pause);
  return { ...read, bytes: bytes.byteLength };
}

async function readText(
  text: string,
  encoding: TextEncoding | undefined,
  name: string | undefined,
  chunker: Chunker,
  progress: Progress,
  pause: Pause,
): Promise<Omit<DocumentRead, "chunks">> {
  if (text.length > MAX_TEXT_CHARS) throw tooMuchText(text.length, MAX_TEXT_CHARS);
  const format = textFormat(text, name);
  if (format === "html") await chunkHtml(text, chunker, progress, pause);
  else
    await chunkAll(
      format === "markdown" ? markdownScan(text) : textScan(text),
      text.length,
      chunker,
      progress,
      pause,
    );
  return { format, bytes: 0, ...(encoding ? { encoding } : {}) };
}

/**
 * Blocks into the chunker, the loop given back each time the scan says another slice of the
 * text is behind it: characters scanned, not block text, since blank lines make no block.
 */
async function chunkAll(
  scan: Iterable<Scanned>,
  total: number,
  chunker: Chunker,
  progress: Progress,
  pause: Pause,
) {
  for (const item of scan) {
    if (typeof item !== "number") {
      chunker.push(item);
      continue;
    }
    progress({ phase: "indexing", done: Math.min(item, total), total });
    await pause(true);
  }
  progress({ phase: "indexing", done: total, total });
}

async function chunkHtml(html: string, chunker: Chunker, progress: Progress, pause: Pause) {
  const scan = new HtmlBlocks(html);
  while (!scan.done) {
    for (const block of scan.step(SLICE_CHARS)) chunker.push(block);
    progress({ phase: "indexing", done: scan.position, total: html.length });
    await pause(true);
  }
}

async function readPdf(
  bytes: Uint8Array,
  chunker: Chunker,
  progress: Progress,
  pause: Pause,
  signal: AbortSignal | undefined,
) {
  let chars = 0;
  let pages = 0;
  for await (const { page, total, text } of pdfPages(bytes, { signal })) {
    chars += text.length;
    if (chars > MAX_TEXT_CHARS) throw tooMuchText(chars, MAX_TEXT_CHARS);
    // A page of megabytes gives the loop back as text does.
    for (const item of textScan(text)) {
      if (typeof item === "number") await pause(true);
      else chunker.push({ ...item, page } as Block);
    }
    progress({ phase: "reading", done: page, total });
    pages = total;
    // pdf.js's next page gives the loop back itself.
    await pause(false);
  }
  progress({ phase: "indexing", done: chars, total: chars });
  return { format: "pdf" as const, bytes: bytes.byteLength, pages };
}
