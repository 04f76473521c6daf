import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readDocumentFile } from "../../src/documents/document-file.ts";
import { livePdfThreads } from "../../src/documents/pdf-pages.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import { heavyPage, pdfOf } from "./pdf-raw.ts";

/**
 * Run by pdf-thread.test.ts as its own process: a heavy PDF page read from a file while pings
 * (a timer, one after another) run; prints, as JSON, how many ran before the text came,
 * whether a PDF thread was live at each, the modules of pdf.js (and its reader) this thread
 * loaded, and the start of the text.
 */
const path = join(tmpdir(), `local-ai-heavy-${process.pid}.pdf`);
writeFileSync(path, pdfOf([heavyPage()]));
let pings = 0;
let threadless = 0;
let reading = true;
const ping = () => {
  if (!reading) return;
  pings++;
  if (livePdfThreads() === 0) threadless++;
  // Not back to back: a spinning loop would take the CPU the thread needs.
  setTimeout(ping, 1);
};
try {
  const read = readDocument({ path }, { readFile: readDocumentFile, onChunks: async () => {} });
  setImmediate(ping);
  const text = (await read).chunks[0]?.text.slice(0, 16) ?? "";
  reading = false;
  const onLoop = Object.keys(require.cache).filter((m) => /unpdf|pdfjs|documents\/pdf-text/.test(m));
  console.log(JSON.stringify({ pings, threadless, onLoop, text }));
} finally {
  reading = false;
  rmSync(path, { force: true });
}
