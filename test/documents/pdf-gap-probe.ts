import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readDocumentFile } from "../../src/documents/document-file.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import { heavyPage, pdfOf } from "./pdf-raw.ts";

/**
 * Run by pdf-thread.test.ts as its own process: a heavy PDF page read from a file while a timer
 * ticks; prints the largest gap between ticks (ms) and the start of the text, as JSON.
 */
const path = join(tmpdir(), `local-ai-heavy-${process.pid}.pdf`);
writeFileSync(path, pdfOf([heavyPage()]));
let worst = 0;
let last = performance.now();
const tick = setInterval(() => {
  const now = performance.now();
  worst = Math.max(worst, now - last);
  last = now;
}, 5);
try {
  const read = await readDocument({ path }, { readFile: readDocumentFile, onChunks: async () => {} });
  worst = Math.max(worst, performance.now() - last);
  console.log(JSON.stringify({ worst, text: read.chunks[0]?.text.slice(0, 16) ?? "" }));
} finally {
  clearInterval(tick);
  rmSync(path, { force: true });
}
