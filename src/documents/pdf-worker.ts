import { MAX_PDF_BUFFER_BYTES } from "./limits.ts";
import { capPdfThread } from "./pdf-alloc-cap.ts";
import type { PdfAnswer, PdfAsk } from "./pdf-pages.ts";
import { readPdfText } from "./pdf-text.ts";

/**
 * The PDF's thread (`pdf-pages.ts`): one per document, handed the file's bytes once; it posts
 * each page's text as pdf.js reads it, then `done`, or the refusal (a CoreError's parts). The
 * main side ends it when the reader stops. Built as an entry point of its own (scripts/compile.ts).
 */
declare const self: {
  onmessage: ((event: MessageEvent<PdfAsk>) => void) | null;
  postMessage(message: PdfAnswer): void;
};

// Before pdf.js is loaded or runs: no buffer it makes on this thread passes the cap.
const cap = capPdfThread(MAX_PDF_BUFFER_BYTES, globalThis);

self.onmessage = async (event: MessageEvent<PdfAsk>) => {
  try {
    for await (const page of readPdfText(event.data.bytes, cap)) self.postMessage({ kind: "page", ...page });
    self.postMessage({ kind: "done" });
  } catch (err) {
    const e = err as { name?: string; message?: string; code?: string; data?: Record<string, unknown> };
    self.postMessage({
      kind: "error",
      error: { name: e.name ?? "Error", message: e.message ?? String(err), code: e.code, data: e.data },
    });
  }
};
