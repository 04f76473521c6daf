/**
 * Ingest (issue 29 target: documents.add to FTS in ≤ 1.2× the time the PDF library alone takes
 * to extract the text): a 300-page text PDF written by test/fixtures/pdf-writer.ts (40 lines of
 * ~80 characters a page), then, alternating in the same run, pdf.js (unpdf/pdfjs) extracting
 * every page's text alone vs `addDocument` (documents/add-document.ts: read, chunk, store in FTS5
 * on the store's chunk thread while the rest is read, commit) into an open database. Prints each pair, the medians and the median of
 * the per-pair ratios.
 *
 *   bun bench/retrieval/ingest.ts [pairs=7]
 *   INGEST_ONE_THREAD=1 bun bench/retrieval/ingest.ts   (no chunk thread, store/chunk-thread.ts)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { addDocument } from "../../src/documents/add-document.ts";
import { Store } from "../../src/store/store.ts";
import { minimalPdf } from "../../test/fixtures/pdf-writer.ts";

const PAGES = 300;
const pairs = Number(process.argv[2] ?? 7);

let seed = 11;
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const VOCABULARY = Array.from({ length: 8000 }, (_, i) => `w${i.toString(36)}x`);
const line = () => {
  let s = "";
  while (s.length < 80) s += `${VOCABULARY[Math.floor(random() ** 2 * VOCABULARY.length)]} `;
  return s.trim();
};
// Paragraphs of 8 lines, so the text has blank lines to chunk on as a real book does.
const pdf = minimalPdf(
  Array.from({ length: PAGES }, () => Array.from({ length: 40 }, (_, i) => (i % 8 === 7 ? "" : line()))),
);

/** pdf.js alone: every page's text items joined, as a library user would extract text. */
async function extractOnly(): Promise<number> {
  const { getDocument } = await import("unpdf/pdfjs");
  const doc = await getDocument({
    data: new Uint8Array(pdf),
    verbosity: 0,
    useSystemFonts: false,
    disableFontFace: true,
  }).promise;
  let chars = 0;
  for (let n = 1; n <= doc.numPages; n++) {
    const page = await doc.getPage(n);
    const content = await page.getTextContent();
    for (const item of content.items) if ("str" in item) chars += item.str.length;
    page.cleanup();
  }
  await doc.loadingTask.destroy();
  return chars;
}

/**
 * documents.add's work to FTS into one data folder whose database is open, as a running core's
 * is (its chunk thread started by the untimed first add); only the add is timed.
 */
const dir = mkdtempSync(join(tmpdir(), "local-ai-ingest-"));
// INGEST_ONE_THREAD=1: the chunks written on the main thread (no chunk thread), to compare.
const store = Store.open(dir, { chunkThread: process.env.INGEST_ONE_THREAD !== "1" });
let added = 0;
async function addToFts(): Promise<{ ms: number; n: number }> {
  const t = performance.now();
  const doc = await addDocument(
    { user_id: "bench", path: "book.pdf" },
    {
      store,
      readFile: async () => pdf,
      signal: new AbortController().signal,
      progress: () => {},
      settle: () => true,
      now: Date.now,
      newId: () => `doc-bench-${added++}`,
    },
  );
  return { ms: performance.now() - t, n: doc.chunks };
}

const time = async (f: () => Promise<number>) => {
  const t = performance.now();
  const n = await f();
  return { ms: performance.now() - t, n };
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

// One of each first, untimed: module loading and pdf.js's first-use costs.
await extractOnly();
await addToFts();
const lib: number[] = [];
const add: number[] = [];
const ratios: number[] = [];
let chunks = 0;
for (let i = 0; i < pairs; i++) {
  // Alternate which goes first, so drift in the machine's load falls on both sides.
  const [a, b] =
    i % 2 === 0
      ? [await time(extractOnly), await addToFts()]
      : await addToFts().then(async (x) => [await time(extractOnly), x] as const);
  chunks = b.n;
  lib.push(a.ms);
  add.push(b.ms);
  ratios.push(b.ms / a.ms);
  console.log(
    `pair ${i}: pdf.js alone ${a.ms.toFixed(0)} ms, documents.add to FTS ${b.ms.toFixed(0)} ms (${(b.ms / a.ms).toFixed(2)}×)`,
  );
}
store.close();
rmSync(dir, { recursive: true, force: true });
console.log(
  `${PAGES}-page PDF (${pdf.byteLength} bytes, ${chunks} chunks): pdf.js alone median ${median(lib).toFixed(0)} ms, documents.add to FTS median ${median(add).toFixed(0)} ms; median ratio ${median(ratios).toFixed(2)}× (target ≤ 1.2×); best of each ${Math.min(...lib).toFixed(0)} vs ${Math.min(...add).toFixed(0)} ms (${(Math.min(...add) / Math.min(...lib)).toFixed(2)}×: the least disturbed by other load)`,
);
