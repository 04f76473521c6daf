import { MAX_PDF_PAGES } from "./limits.ts";
import { checkFlateStreams } from "./pdf-streams.ts";
import { documentProblem } from "./refusal.ts";
import { nextTurn } from "./turn.ts";

/**
 * A PDF's text layer, page by page, through unpdf (pdf.js's serverless build: no worker, no
 * native code), loaded only when a PDF comes (docs/agent.md "Documents"). Before pdf.js reads
 * the file its Flate streams are measured (`pdf-streams.ts`); the page tree is checked against
 * MAX_PDF_PAGES before any page is read; the loop is given back between pages (pdf.js itself
 * yields within a page's content every 20 ms). pdf.js's own warnings are silenced: in
 * `serve-stdio` stdout is the protocol's alone.
 */
export interface PdfPage {
  /** From 1. */
  page: number;
  total: number;
  /** Lines as pdf.js ends them; a blank line where the layout leaves one. */
  text: string;
}

export async function* pdfPages(bytes: Uint8Array): AsyncGenerator<PdfPage> {
  await checkFlateStreams(bytes);
  // pdf.js itself, not unpdf's index: that one calls `import.meta.resolve`, which a CommonJS
  // bundle (the compiled binary's) cannot parse, and the whole binary would fail to load.
  const { getDocument } = await import("unpdf/pdfjs");
  // pdf.js takes over (detaches) the buffer it is given: it gets a copy.
  const doc = await getDocument({
    data: new Uint8Array(bytes),
    verbosity: 0,
    useSystemFonts: false,
    disableFontFace: true,
  }).promise.catch((err: unknown) => {
    throw refusalOf(err);
  });
  try {
    if (doc.numPages > MAX_PDF_PAGES)
      throw documentProblem("too_large", `the PDF has ${doc.numPages} pages, over the ${MAX_PDF_PAGES} read`);
    for (let page = 1; page <= doc.numPages; page++) {
      const text = await pageText(doc, page).catch((err: unknown) => {
        throw refusalOf(err);
      });
      yield { page, total: doc.numPages, text };
      await nextTurn();
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
