import { MAX_PDF_PAGES, MAX_TEXT_CHARS } from "./limits.ts";
import type { PdfPage } from "./pdf-pages.ts";
import { checkPdfStreams } from "./pdf-streams.ts";
import { documentProblem, tooMuchText } from "./refusal.ts";

/**
 * A PDF's text layer, page by page, through unpdf (pdf.js's serverless build: no worker of its
 * own, no native code), on the PDF's thread (`pdf-worker.ts`, docs/agent.md "Documents"): pdf.js
 * never gives its loop back within a page, so it must not run on the core's. Before pdf.js reads
 * the file its streams are measured (`pdf-streams.ts`); the page tree is checked against
 * MAX_PDF_PAGES before any page is read; past MAX_TEXT_CHARS it stops (the reader refuses there
 * too), so the pages waiting for the main loop stay bounded. pdf.js's warnings are silenced.
 */
export async function* readPdfText(bytes: Uint8Array): AsyncGenerator<PdfPage> {
  await checkPdfStreams(bytes);
  // pdf.js itself, not unpdf's index: that one calls `import.meta.resolve`, which a CommonJS
  // bundle (the compiled binary's) cannot parse, and the whole binary would fail to load.
  const { getDocument } = await import("unpdf/pdfjs");
  const doc = await getDocument({
    data: bytes,
    verbosity: 0,
    useSystemFonts: false,
    disableFontFace: true,
  }).promise.catch((err: unknown) => {
    throw refusalOf(err);
  });
  try {
    if (doc.numPages > MAX_PDF_PAGES)
      throw documentProblem("too_large", `the PDF has ${doc.numPages} pages, over the ${MAX_PDF_PAGES} read`);
    let chars = 0;
    for (let page = 1; page <= doc.numPages; page++) {
      const text = await pageText(doc, page).catch((err: unknown) => {
        throw refusalOf(err);
      });
      chars += text.length;
      yield { page, total: doc.numPages, text };
      if (chars > MAX_TEXT_CHARS) throw tooMuchText(chars, MAX_TEXT_CHARS);
    }
  } finally {
    await doc.loadingTask.destroy();
  }
}

type Doc = Awaited<ReturnType<typeof import("unpdf/pdfjs").getDocument>["promise"]>;

async function pageText(doc: Doc, number: number): Promise<string> {
  const page = await doc.getPage(number);
  try {
    const content = await page.getTextContent();
    let text = "";
    for (const item of content.items) {
      if (!("str" in item)) continue;
      text += item.str;
      if (item.hasEOL) text += "\n";
    }
    return text;
  } finally {
    page.cleanup();
  }
}

/** pdf.js's failures as the document's problem; a refusal of ours passes as it is. */
function refusalOf(err: unknown): Error {
  const name = (err as { name?: string } | undefined)?.name;
  if (name === "CoreError") return err as Error;
  if (name === "PasswordException")
    return documentProblem(
      "encrypted",
      "the PDF is encrypted (it needs a password): nothing in it can be read",
    );
  const why = err instanceof Error ? err.message : String(err);
  return documentProblem("damaged", `the PDF cannot be read (damaged or truncated?): ${why}`);
}
