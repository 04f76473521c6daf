/**
 * What reading a document may cost (docs/agent.md "Documents"): each bound is checked before
 * the work it bounds, so a hostile file is refused rather than read without end.
 */

/** A file's size, checked by stat before a byte is read. */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;
/**
 * What the documents read at once may come to, file sizes added (`add-document.ts`): reading holds
 * a file's bytes, its text and its chunks, about three times its size, so twenty 64 MiB files
 * added together would hold gigabytes. A file bigger than this alone is read when nothing else is.
 */
export const MAX_READING_BYTES = 256 * 1024 * 1024;
/** The text a document may yield in all: ~13,000 chunks, a few thousand book pages. */
export const MAX_TEXT_CHARS = 16 * 1024 * 1024;
/** A PDF's pages, checked from its page tree before any page is read. */
export const MAX_PDF_PAGES = 5000;
/** What one of a PDF's Flate streams may inflate to (images aside: text extraction skips them). */
export const MAX_INFLATED_STREAM_BYTES = 64 * 1024 * 1024;
/** The streams a PDF may hold (a book has thousands); each is looked at before pdf.js reads it. */
export const MAX_PDF_STREAMS = 100_000;
/**
 * The deepest a PDF's dictionaries and arrays may nest (`pdf-dict.ts`): the stream pass's lexer,
 * like pdf.js's parser, reads each level by a call, so 100,000 nested dictionaries overflowed the
 * PDF's thread's stack; a real file nests a dozen deep.
 */
export const MAX_PDF_NESTING = 1000;
/**
 * The longest buffer pdf.js may make on the PDF's thread (`pdf-alloc-cap.ts`): it doubles a
 * stream's buffer as it decodes, so a stream the pass allows fits; anything past is refused.
 */
export const MAX_PDF_BUFFER_BYTES = 2 * MAX_INFLATED_STREAM_BYTES;
/**
 * How much the core's resident memory may grow while a PDF's thread runs (`pdf-pages.ts`): what
 * no cap on a buffer sees (a decoder gathering small pieces: pdf.js's Brotli) ends the thread
 * here. pdf.js reading a 64 MiB book's text stays far below it.
 */
export const MAX_PDF_THREAD_GROWTH_BYTES = 1024 * 1024 * 1024;
/**
 * How long a PDF's thread may go without a page (`pdf-pages.ts`), its opening included: pdf.js
 * rebuilding a damaged file's cross-references is quadratic in it (a 4 MB file took most of an
 * hour, every PDF after it waiting), where a real book's heaviest page takes seconds.
 */
export const MAX_PDF_STALL_MS = 120_000;
/** What all of them together may inflate to. */
export const MAX_INFLATED_TOTAL_BYTES = 512 * 1024 * 1024;
/** The characters a chunk aims at; a paragraph longer than this is split at sentences or words. */
export const CHUNK_TARGET_CHARS = 1200;
/** The most of a heading each chunk under it carries (chunk.ts): six levels stay under a chunk's size. */
export const HEADING_CHARS = 160;
/** Characters worked through between two turns of the event loop. */
export const SLICE_CHARS = 64 * 1024;
/**
 * The chunks a document may yield: a heading starts one, so 16 Mi characters of one-word
 * sections made 2.8 million (half a GiB held while read, a row, an index entry and a vector
 * each). About four books' worth of full chunks: sections of ~300 characters fill the text limit.
 */
export const MAX_DOCUMENT_CHUNKS = 50_000;
