import { CoreError, type ErrorCode } from "../protocol/errors.ts";
import { workerEntry } from "../util/worker-entry.ts";
import { documentProblem } from "./refusal.ts";
import { nextTurn } from "./turn.ts";

/**
 * A PDF's pages as the main loop sees them (docs/agent.md "Documents"): pdf.js reads the file on
 * a thread of its own (`pdf-worker.ts`, through `pdf-text.ts`), since it never gives its loop
 * back within a page (a page of millions of operators holds it for seconds) and rebuilding a
 * damaged file's cross-references is as long. A thread per document: pdf.js keeps fonts and
 * caches per document, a PDF comes seldom, and ending the thread is the only way to stop pdf.js
 * mid-page. It is ended as soon as the reader stops, read to the end, refused or cancelled.
 */
export interface PdfPage {
  /** From 1. */
  page: number;
  total: number;
  /** Lines as pdf.js ends them; a blank line where the layout leaves one. */
  text: string;
}

export interface PdfAsk {
  bytes: Uint8Array;
}

export type PdfAnswer =
  | ({ kind: "page" } & PdfPage)
  | { kind: "done" }
  | {
      kind: "error";
      error: { name: string; message: string; code?: string; data?: Record<string, unknown> };
    };

const workerFile = () =>
  workerEntry("./documents/pdf-worker.ts", new URL("./pdf-worker.ts", import.meta.url));

/** PDF threads not yet ended (the tests' view of "the thread was ended"). */
let live = 0;
export const livePdfThreads = (): number => live;

export async function* pdfPages(bytes: Uint8Array): AsyncGenerator<PdfPage> {
  const answers: PdfAnswer[] = [];
  let wake: (() => void) | undefined;
  const hear = (answer: PdfAnswer) => {
    answers.push(answer);
    wake?.();
  };
  const worker = new Worker(workerFile());
  live++;
  worker.addEventListener(
    "close",
    () => {
      live--;
      hear({ kind: "error", error: { name: "Error", message: "the PDF's thread stopped" } });
    },
    { once: true },
  );
  // A worker left running never keeps the core alive.
  worker.unref();
  worker.onmessage = (event: MessageEvent<PdfAnswer>) => hear(event.data);
  worker.onerror = (event) => {
    event.preventDefault();
    hear({ kind: "error", error: { name: "Error", message: `the PDF's thread stopped: ${event.message}` } });
  };
  try {
    // The thread gets a copy (pdf.js takes over the buffer it reads), handed over, not cloned again.
    const copy = new Uint8Array(bytes);
    worker.postMessage({ bytes: copy } satisfies PdfAsk, [copy.buffer]);
    for (;;) {
      const answer = answers.shift();
      if (!answer) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      if (answer.kind === "done") return;
      if (answer.kind === "error") throw errorOf(answer.error);
      yield { page: answer.page, total: answer.total, text: answer.text };
      // Pages that came while this one was used wait a turn each: the loop is never held by a run.
      await nextTurn();
    }
  } finally {
    worker.terminate();
  }
}

/** The thread's refusal as a CoreError again; anything else (the thread died) as a damaged file. */
function errorOf(e: Extract<PdfAnswer, { kind: "error" }>["error"]): Error {
  if (e.name === "CoreError") return new CoreError(e.code as ErrorCode, e.message, e.data);
  return documentProblem("damaged", `the PDF cannot be read: ${e.message}`);
}
