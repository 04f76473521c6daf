import { describe, expect, test } from "bun:test";
import { brotliCompressSync, constants, deflateSync } from "node:zlib";
import { MAX_PDF_BUFFER_BYTES } from "../../src/documents/limits.ts";
import { capPdfThread } from "../../src/documents/pdf-alloc-cap.ts";
import { livePdfThreads, pdfPages } from "../../src/documents/pdf-pages.ts";
import { checkPdfStreams } from "../../src/documents/pdf-streams.ts";
import { waitFor } from "../fixtures/wait.ts";
import { heavyPage, hiddenStream, pdfOf } from "./pdf-raw.ts";

// The PDF thread's last bound on pdf.js's buffers (docs/agent.md "Documents", pdf-alloc-cap.ts).

describe("the Uint8Array cap", () => {
  test("a new array past the cap throws and is remembered; data, views and copies pass", () => {
    const g = { Uint8Array };
    const cap = capPdfThread(100, g);
    expect(new g.Uint8Array(100).length).toBe(100);
    expect(cap.met()).toBe(false);
    expect(g.Uint8Array.from([1, 2, 3])).toEqual(new Uint8Array([1, 2, 3]));
    expect(new g.Uint8Array(new ArrayBuffer(1000)).length).toBe(1000);
    expect(new g.Uint8Array(new Uint8Array(500)).length).toBe(500);
    expect(new Uint8Array(4) instanceof g.Uint8Array).toBe(true);
    class Sub extends g.Uint8Array {}
    expect(new Sub(8)).toBeInstanceOf(Uint8Array);
    expect(() => new g.Uint8Array(101)).toThrow(RangeError);
    expect(cap.met()).toBe(true);
    expect(() => new Sub(1_000)).toThrow(RangeError);
  });
});

async function readAll(pdf: Uint8Array, options?: Parameters<typeof pdfPages>[1]): Promise<string[]> {
  const texts: string[] = [];
  for await (const page of pdfPages(pdf, options)) texts.push(page.text);
  return texts;
}

const tooLarge = expect.objectContaining({ code: "invalid_request", data: { problem: "too_large" } });

/** The process's resident memory at its highest while `run` runs, less what it was before. */
async function peakGrowth(run: () => unknown): Promise<number> {
  const before = process.memoryUsage.rss();
  let peak = 0;
  const sample = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss() - before);
  }, 5);
  try {
    await run();
  } finally {
    clearInterval(sample);
  }
  return peak;
}

describe("a stream the pass cannot see is bounded on the PDF's thread", () => {
  test("the hidden stream is read by pdf.js: a page of text comes through it", async () => {
    const text = deflateSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Hidden) Tj ET"));
    expect(await readAll(hiddenStream(text))).toEqual(["Hidden"]);
  });

  test("hidden, a Flate bomb past the cap is refused as too_large, pdf.js's buffer stopped at the cap", async () => {
    // 1 GiB of NULs (white space to pdf.js), about 1 MiB deflated; the zeros are never all in memory here.
    const decoded = 1024 * 1024 * 1024;
    const bomb = deflateSync(Buffer.alloc(decoded));
    const pdf = hiddenStream(bomb);
    // The pass alone lets it through: only the cap stands between pdf.js and the bomb.
    await checkPdfStreams(pdf);
    const peak = await peakGrowth(() => expect(readAll(pdf)).rejects.toThrow(tooLarge));
    // Uncapped, pdf.js fills a buffer of 1 GiB (and holds the 512 MiB one before it a moment).
    expect(peak).toBeLessThan(decoded / 2);
    expect(MAX_PDF_BUFFER_BYTES).toBeLessThan(decoded / 4);
  }, 60_000);
});

describe("the PDF thread's memory watch", () => {
  test("hidden, a Brotli bomb (pdf.js gathers its output in small pieces) is refused as too_large near the bound", async () => {
    const decoded = 1024 * 1024 * 1024;
    const bomb = brotliCompressSync(Buffer.alloc(decoded), {
      params: { [constants.BROTLI_PARAM_QUALITY]: 1 },
    });
    const growth = 256 * 1024 * 1024;
    const pdf = hiddenStream(bomb, "/BrotliDecode");
    await checkPdfStreams(pdf);
    const peak = await peakGrowth(() =>
      expect(readAll(pdf, { memoryGrowth: growth })).rejects.toThrow(tooLarge),
    );
    // Unwatched, this one took 2.2 GB here.
    expect(peak).toBeLessThan(growth + 256 * 1024 * 1024);
    // The thread's end is heard off the loop: as late as a loaded machine makes it.
    expect(await waitFor(() => livePdfThreads() === 0, { intervalMs: 5 })).toBe(true);
  }, 60_000);

  test("memory grown past the bound ends the thread mid-page and says how much", async () => {
    let resident = 1024 * 1024;
    // A page pdf.js works through for seconds: the bound is passed while it is on it.
    const reading = readAll(pdfOf([heavyPage()]), { memoryGrowth: 1024 * 1024, resident: () => resident });
    await Bun.sleep(30);
    resident = 3 * 1024 * 1024;
    await expect(reading).rejects.toThrow(
      expect.objectContaining({
        message: expect.stringContaining("reading the PDF took 2 MiB, over the 1 MiB"),
      }),
    );
    // The thread's end is heard off the loop: as late as a loaded machine makes it.
    expect(await waitFor(() => livePdfThreads() === 0, { intervalMs: 5 })).toBe(true);
  });

  test("memory within the bound: the file is read", async () => {
    const pdf = hiddenStream(deflateSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Kept) Tj ET")));
    expect(await readAll(pdf, { memoryGrowth: 1000, resident: () => 1000 })).toEqual(["Kept"]);
  });
});
