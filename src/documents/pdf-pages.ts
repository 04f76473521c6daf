import { CoreError, type ErrorCode } from "../protocol/errors.ts";
import { nextTurn } from "../util/next-turn.ts";
import { Semaphore } from "../util/semaphore.ts";
import { within } from "../util/within.ts";
import { workerEntry } from "../util/worker-entry.ts";
import { MAX_PDF_STALL_MS, MAX_PDF_THREAD_GROWTH_BYTES } from "./limits.ts";
import { documentProblem } from "./refusal.ts";

/**
 * A PDF's pages as the main loop sees them (docs/agent.md "Documents"): pdf.js reads the file on
 * a thread of its own (`pdf-worker.ts`, through `pdf-text.ts`), since it never gives its loop
 * back within a page (a page of millions of operators holds it for seconds) and rebuilding a
 * damaged file's cross-references is as long. A thread per document: pdf.js keeps fonts and
 * caches per document, a PDF comes seldom, and ending the thread is the only way to stop pdf.js
 * mid-page. It is ended as soon as the reader stops, read to the end, refused or cancelled.
 * While it runs, the process's resident memory is looked at every MEMORY_LOOK_MS: grown past
 * `memoryGrowth` (MAX_PDF_THREAD_GROWTH_BYTES) since the thread began, the thread is ended and
 * the file refused as `too_large`, whatever in pdf.js took it (`pdf-alloc-cap.ts` bounds its
 * buffers more tightly; this bounds the rest). Nor may it go MAX_PDF_STALL_MS without a page:
 * pdf.js rebuilding a damaged file's cross-references is quadratic in what it holds (a 4 MB file
 * of object headers whose strings never close took most of an hour), so such a thread is ended
 * and the file refused as `too_large` too.
 */
const MEMORY_LOOK_MS = 10;
/** How long the next PDF waits for an ended thread to be gone (it is in milliseconds). */
const THREAD_END_WAIT_MS = 1000;

export interface PdfPagesOptions {
  /**
   * Ends the wait for the thread, or the thread itself mid-page, at once: the generator throws
   * the signal's reason.
   */
  signal?: AbortSignal;
  memoryGrowth?: number;
  /** The process's resident bytes now (tests give their own). */
  resident?: () => number;
  /**
   * Arms a one-shot timer of MAX_PDF_STALL_MS that calls `fire`, returning its cancel: armed when
   * the thread starts and again at each page it sends (tests give their own, fired at will).
   */
  stallTimer?: (fire: () => void) => () => void;
}
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

/**
 * One PDF read at a time, the others waiting in order: pdf.js holds a book's file and what it
 * made of it (250–350 MiB for a 64 MiB one), so twenty dropped at once would hold gigabytes, and
 * the memory watch measures one thread's growth, not twenty's together.
 */
const oneAtATime = new Semaphore(() => 1);
const NEVER = new AbortController().signal;

export async function* pdfPages(bytes: Uint8Array, options: PdfPagesOptions = {}): AsyncGenerator<PdfPage> {
  const signal = options.signal ?? NEVER;
  const release = await oneAtATime.acquire(signal);
  try {
    yield* readOnThread(bytes, signal, options);
  } finally {
    release();
  }
}

async function* readOnThread(
  bytes: Uint8Array,
  signal: AbortSignal,
  options: PdfPagesOptions,
): AsyncGenerator<PdfPage> {
  const answers: PdfAnswer[] = [];
  let wake: (() => void) | undefined;
  // Why the core ended the thread itself (its memory, no page for too long): the read's refusal.
  let endedFor: Error | undefined;
  const end = (refusal: Error) => {
    worker.terminate();
    endedFor ??= refusal;
    wake?.();
  };
  let pages = 0;
  // Started before the thread: its answers may stop it.
  const watch = watchMemory(options, end);
  const stall = new StallWatch(options.stallTimer ?? defaultStallTimer, () => end(stallRefusal(pages)));
  const hear = (answer: PdfAnswer) => {
    // The thread's last word (done, an error) stops the timer: what is left is the reader's, whose
    // pace (the store taking the chunks) is no stall of pdf.js's.
    if (answer.kind !== "page") {
      stall.stop();
      // The memory watch measures the process: its growth from here is the reader's, not pdf.js's.
      clearInterval(watch);
    } else {
      pages++;
      stall.arm();
    }
    answers.push(answer);
    wake?.();
  };
  const { worker, closed } = startThread(hear);
  const aborted = () => {
    worker.terminate();
    wake?.();
  };
  signal.addEventListener("abort", aborted, { once: true });
  try {
    // The thread gets a copy (pdf.js takes over the buffer it reads), handed over, not cloned again.
    const copy = new Uint8Array(bytes);
    worker.postMessage({ bytes: copy } satisfies PdfAsk, [copy.buffer]);
    stall.arm();
    for (;;) {
      signal.throwIfAborted();
      if (endedFor) throw endedFor;
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
    signal.removeEventListener("abort", aborted);
    clearInterval(watch);
    stall.stop();
    worker.terminate();
    // The next PDF's thread starts once this one is gone, its memory with it.
    await within(closed, THREAD_END_WAIT_MS, undefined);
  }
}

/** A PDF's thread, each answer and its end heard by `hear`; `closed` once it is gone. */
function startThread(hear: (answer: PdfAnswer) => void): { worker: Worker; closed: Promise<void> } {
  const worker = new Worker(workerFile());
  live++;
  const closed = Promise.withResolvers<void>();
  worker.addEventListener(
    "close",
    () => {
      live--;
      closed.resolve();
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
  return { worker, closed: closed.promise };
}

/** The thread's timer between pages: armed again at each page, stopped when the read ends. */
class StallWatch {
  private cancel: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly timer: (fire: () => void) => () => void,
    private readonly fire: () => void,
  ) {}

  arm(): void {
    if (this.stopped) return;
    this.cancel?.();
    this.cancel = this.timer(() => {
      if (!this.stopped) this.fire();
    });
  }

  stop(): void {
    this.stopped = true;
    this.cancel?.();
  }
}

function defaultStallTimer(fire: () => void): () => void {
  const timer = setTimeout(fire, MAX_PDF_STALL_MS);
  timer.unref?.();
  return () => clearTimeout(timer);
}

function stallRefusal(pages: number): Error {
  return documentProblem(
    "too_large",
    `pdf.js read no page of the PDF in ${MAX_PDF_STALL_MS / 1000} s (after ${pages} pages): a file this slow to read is refused (damaged, or built to be slow?)`,
  );
}

/** Tells `over` once, with the refusal, when the process has grown past the bound since now. */
function watchMemory(
  options: PdfPagesOptions,
  over: (refusal: Error) => void,
): ReturnType<typeof setInterval> {
  const resident = options.resident ?? (() => process.memoryUsage.rss());
  const growth = options.memoryGrowth ?? MAX_PDF_THREAD_GROWTH_BYTES;
  const base = resident();
  const watch = setInterval(() => {
    const grown = resident() - base;
    if (grown <= growth) return;
    clearInterval(watch);
    const mib = (n: number) => Math.round(n / 1024 / 1024);
    over(
      documentProblem(
        "too_large",
        `reading the PDF took ${mib(grown)} MiB, over the ${mib(growth)} MiB it may (a compression bomb?)`,
      ),
    );
  }, MEMORY_LOOK_MS);
  watch.unref?.();
  return watch;
}

/** The thread's refusal as a CoreError again; anything else (the thread died) as a damaged file. */
function errorOf(e: Extract<PdfAnswer, { kind: "error" }>["error"]): Error {
  if (e.name === "CoreError") return new CoreError(e.code as ErrorCode, e.message, e.data);
  return documentProblem("damaged", `the PDF cannot be read: ${e.message}`);
}
