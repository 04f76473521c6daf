import { MAX_PDF_BUFFER_BYTES, MAX_PDF_NESTING, MAX_PDF_PAGES, MAX_TEXT_CHARS } from "./limits.ts";
import type { AllocationCap } from "./pdf-alloc-cap.ts";
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
 * `cap` is the thread's bound on pdf.js's buffers (`pdf-alloc-cap.ts`): pdf.js may pass over a
 * stream it could not decode and go on, so the cap, once met, refuses the file here.
 */
export async function* readPdfText(bytes: Uint8Array, cap: AllocationCap): AsyncGenerator<PdfPage> {
  await checkPdfStreams(bytes);
  const refusalOf = (err: unknown) => (cap.met() ? overCap() : pdfProblem(err));
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
      if (cap.met()) throw overCap();
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

function overCap(): Error {
  return documentProblem(
    "too_large",
    `a stream of the PDF decodes past ${MAX_PDF_BUFFER_BYTES / 1024 / 1024} MiB (a compression bomb?)`,
  );
}

/** pdf.js's failures as the document's problem; a refusal of ours passes as it is. */
function pdfProblem(err: unknown): Error {
  const name = (err as { name?: string } | undefined)?.name;
  if (name === "CoreError") return err as Error;
  if (name === "PasswordException")
    return documentProblem(
      "encrypted",
      "the PDF is encrypted (it needs a password): nothing in it can be read",
    );
  const why = err instanceof Error ? err.message : String(err);
  // pdf.js's parser recurses per level (and hands its RangeError on as a plain error): nesting
  // deeper than the stack, in an object the stream pass never reads (it refuses past
  // MAX_PDF_NESTING what it does: `pdf-dict.ts`), ends up here.
  if (/maximum call stack size exceeded/i.test(why))
    return documentProblem(
      "too_large",
      `the PDF nests its objects too deep to be read (over ${MAX_PDF_NESTING})`,
    );
  return documentProblem("damaged", `the PDF cannot be read (damaged or truncated?): ${why}`);
}
