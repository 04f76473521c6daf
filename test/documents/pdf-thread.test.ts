import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { lzwDecode } from "../../src/documents/pdf-decoders.ts";
import { livePdfThreads, pdfPages } from "../../src/documents/pdf-pages.ts";
import { waitFor } from "../fixtures/wait.ts";
import { heavyPage, pdfOf } from "./pdf-raw.ts";
import { threadEnds } from "./thread-ends.ts";

/** Codes packed MSB first, their widths as pdf.js reads them (early change 1 unless said). */
function packCodes(codes: number[], earlyChange = 1): Uint8Array {
  const out: number[] = [];
  let acc = 0;
  let n = 0;
  let width = 9;
  let next = 258;
  codes.forEach((code, i) => {
    acc = (acc << width) | code;
    n += width;
    while (n >= 8) {
      n -= 8;
      out.push((acc >>> n) & 0xff);
    }
    acc &= (1 << n) - 1;
    if (i > 0 || code >= 258) {
      next++;
      const k = next + earlyChange;
      if ((k & (k - 1)) === 0) width = Math.min(Math.log2(k) + 1, 12);
    }
  });
  if (n > 0) out.push((acc << (8 - n)) & 0xff);
  return Uint8Array.from(out);
}

/** An LZW stream of spaces that grows its longest code, then repeats it: ~3,840 bytes a code. */
function lzwBomb(repeats: number, earlyChange = 1): Uint8Array {
  const codes = [32];
  for (let k = 258; k <= 4095; k++) codes.push(k);
  for (let i = 0; i < repeats; i++) codes.push(4095);
  return packCodes(codes, earlyChange);
}

const problem = (p: string) => expect.objectContaining({ code: "invalid_request", data: { problem: p } });

async function readAll(pdf: Uint8Array): Promise<string[]> {
  const texts: string[] = [];
  for await (const page of pdfPages(pdf)) texts.push(page.text);
  return texts;
}

describe("a PDF's LZW streams are measured before pdf.js decodes them", () => {
  test("LZW counted as pdf.js decodes it: a text's codes give its length and its bytes", () => {
    // "TOBEORNOT" with a repeat, the textbook example: T O B E O R N O T 258 260 262
    const codes = [84, 79, 66, 69, 79, 82, 78, 79, 84, 258, 260, 262, 257];
    const data = packCodes(codes);
    const built = lzwDecode(data, 1, 1024, true);
    expect(built).toMatchObject({ size: 15 });
    expect(Buffer.from((built as { bytes: Uint8Array }).bytes).toString("latin1")).toBe("TOBEORNOTTOBEOR");
    expect(lzwDecode(data, 1, 1024, false)).toEqual({ size: 15 });
    expect(lzwDecode(data, 1, 10, false)).toBe("too_large");
  });

  test("an LZW bomb (~600 MB from ~240 KB) is refused as too_large, alone, abbreviated or after Flate", async () => {
    const bomb = lzwBomb(160_000);
    for (const [dict, data] of [
      ["/Filter /LZWDecode", bomb],
      ["/Filter [/LZW]", bomb],
      ["/Filter [/FlateDecode /LZWDecode]", deflateSync(bomb)],
      ["/Filter /LZWDecode /DecodeParms << /EarlyChange 0 >>", lzwBomb(160_000, 0)],
    ] as const) {
      const before = process.memoryUsage().rss;
      await expect(readAll(pdfOf([{ dict, data }]))).rejects.toThrow(problem("too_large"));
      // Refused by counting: nothing near the 600 MB pdf.js would have built.
      expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
    }
  }, 60_000);

  test("an LZW page of text is read", async () => {
    const text = "BT /F1 12 Tf 72 700 Td (Hello) Tj ET";
    const codes = [...Buffer.from(text, "latin1")].concat(257);
    const pdf = pdfOf([{ dict: "/Filter /LZWDecode", data: packCodes(codes) }]);
    expect(await readAll(pdf)).toEqual(["Hello"]);
  });
});

describe("pdf.js runs on the PDF's thread", () => {
  const light = (word: string) => ({ dict: "", data: Buffer.from(`BT /F1 12 Tf 72 700 Td (${word}) Tj ET`) });

  test("the main loop keeps turning while a heavy page is read: pdf.js runs only on the thread", async () => {
    // Run as the core runs (`bun run`, not under `bun test`, where pdf.js happens to yield):
    // pdf.js on the main loop held it for seconds here.
    const probe = Bun.spawn([process.execPath, join(import.meta.dir, "pdf-gap-probe.ts")], {
      stdout: "pipe",
      stderr: "inherit",
    });
    const out = await new Response(probe.stdout).text();
    expect(await probe.exited).toBe(0);
    const { pings, threadless, onLoop, text } = JSON.parse(out) as {
      pings: number;
      threadless: number;
      onLoop: string[];
      text: string;
    };
    expect(text).toStartWith("abab");
    // Observed by what ran where, not by a gap's milliseconds: pdf.js never loaded on the main
    // thread, and the loop answered (pings) while a PDF thread read the page.
    expect(onLoop).toEqual([]);
    expect(pings).toBeGreaterThan(0);
    expect(threadless).toBeLessThan(pings);
  }, 60_000);

  test("a reader that stops early ends the thread, even mid-page", async () => {
    for await (const page of pdfPages(pdfOf([light("first"), heavyPage(), light("last")]))) {
      expect(page.text).toBe("first");
      break;
    }
    // The thread's end is heard off the loop: as late as a loaded machine makes it.
    expect(await waitFor(() => livePdfThreads() === 0, { intervalMs: 5 })).toBe(true);
  }, 60_000);
});

describe("one PDF read at a time", () => {
  const light = (word: string) => ({ dict: "", data: Buffer.from(`BT /F1 12 Tf 72 700 Td (${word}) Tj ET`) });
  const texts = async (pdf: Uint8Array, signal?: AbortSignal) => {
    const out: string[] = [];
    for await (const page of pdfPages(pdf, { signal })) out.push(page.text);
    return out;
  };

  test("reads asked together run one after the other, each whole", async () => {
    let most = 0;
    const sample = setInterval(() => {
      most = Math.max(most, livePdfThreads());
    }, 1);
    try {
      const all = await Promise.all(
        ["one", "two", "three"].map((w) => texts(pdfOf([light(w), light(`${w}!`)]))),
      );
      expect(all).toEqual([
        ["one", "one!"],
        ["two", "two!"],
        ["three", "three!"],
      ]);
    } finally {
      clearInterval(sample);
    }
    expect(most).toBe(1);
  }, 60_000);

  test("a cancel ends a read mid-page at once, and one waiting for its turn without a thread", async () => {
    const first = new AbortController();
    const second = new AbortController();
    using threads = threadEnds();
    const heavy = texts(pdfOf([heavyPage()]), first.signal);
    const waiting = texts(pdfOf([light("never")]), second.signal);
    await Bun.sleep(300);
    expect(livePdfThreads()).toBe(1);
    const reason = new Error("cancelled by the host");
    second.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    first.abort(reason);
    await expect(heavy).rejects.toBe(reason);
    // pdf.js on that page takes seconds (the heavy page, ~2.8 s here): the thread was ended
    // before it answered the page, not waited for.
    expect(threads.ends).toEqual([[]]);
    // The thread's end is heard off the loop: as late as a loaded machine makes it.
    expect(await waitFor(() => livePdfThreads() === 0, { intervalMs: 5 })).toBe(true);
    // And the next read is not held by either.
    expect(await texts(pdfOf([light("after")]))).toEqual(["after"]);
  }, 60_000);
});

describe("a PDF's thread may not go long without a page", () => {
  const light = (word: string) => ({ dict: "", data: Buffer.from(`BT /F1 12 Tf 72 700 Td (${word}) Tj ET`) });
  /** A stand-in for the stall timer: each arming kept, fired when the test says. */
  const timers = () => {
    const armed: { fire: () => void; cancelled: boolean }[] = [];
    const stallTimer = (fire: () => void) => {
      const timer = { fire, cancelled: false };
      armed.push(timer);
      return () => {
        timer.cancelled = true;
      };
    };
    return { armed, stallTimer };
  };

  test("pdf.js stuck rebuilding a damaged file's cross-references: the thread is ended, the file refused", async () => {
    // No xref and one object number over and over, each with a string that never closes: pdf.js
    // reads each to the end of the file (most of an hour for these 4 MB).
    const unit = "1 0 obj <</Filter /FlateDecode /A (stream\n";
    const pdf = Buffer.from(`%PDF-1.4\n${unit.repeat(99_000)}`, "latin1");
    const { armed, stallTimer } = timers();
    const read = (async () => {
      for await (const _ of pdfPages(pdf, { stallTimer })) throw new Error("no page was expected");
    })();
    expect(await waitFor(() => armed.length === 1, { intervalMs: 5 })).toBe(true);
    armed[0]?.fire();
    await expect(read).rejects.toThrow(
      expect.objectContaining({ code: "invalid_request", data: { problem: "too_large" } }),
    );
    await read.catch((e: Error) => expect(e.message).toContain("read no page of the PDF"));
    expect(await waitFor(() => livePdfThreads() === 0, { intervalMs: 5 })).toBe(true);
  }, 60_000);

  test("each page arms the timer again, and the read's end stops it", async () => {
    const { armed, stallTimer } = timers();
    const texts: string[] = [];
    for await (const page of pdfPages(pdfOf([light("one"), light("two"), light("three")]), { stallTimer }))
      texts.push(page.text);
    expect(texts).toEqual(["one", "two", "three"]);
    // At the start and at each page; every one cancelled (the last by the read's end).
    expect(armed.length).toBe(4);
    expect(armed.every((t) => t.cancelled)).toBe(true);
  }, 60_000);

  test("the thread's done stops the timer: a reader slow with the last pages is not refused", async () => {
    // The timer stayed armed from the last page heard: a reader held (the store slow with its
    // chunks) 120 s after pdf.js had finished was refused as too_large with every page read.
    const { armed, stallTimer } = timers();
    const texts: string[] = [];
    for await (const page of pdfPages(pdfOf([light("one"), light("two"), light("three")]), { stallTimer })) {
      if (texts.length === 0) {
        // Held at the first page until the thread has sent every page and its done.
        expect(
          await waitFor(() => armed.length === 4 && armed[3]?.cancelled === true, { intervalMs: 5 }),
        ).toBe(true);
        for (const timer of armed) timer.fire();
      }
      texts.push(page.text);
    }
    expect(texts).toEqual(["one", "two", "three"]);
  }, 60_000);

  test("the thread's done stops the memory watch too: the core's growth after it refuses no PDF read whole", async () => {
    // The watch measures the whole process: after pdf.js finished, the store taking the chunks (or
    // a chat) growing the core past the bound refused a PDF whose every page had been read.
    const { armed, stallTimer } = timers();
    let grown = false;
    let looksAfter = 0;
    const resident = () => {
      if (grown) looksAfter++;
      return grown ? 2 ** 40 : 0;
    };
    const texts: string[] = [];
    for await (const page of pdfPages(pdfOf([light("one"), light("two"), light("three")]), {
      stallTimer,
      resident,
      memoryGrowth: 2 ** 30,
    })) {
      if (texts.length === 0) {
        expect(
          await waitFor(() => armed.length === 4 && armed[3]?.cancelled === true, { intervalMs: 5 }),
        ).toBe(true);
        grown = true;
        // No look at the memory once the thread is done (one every 10 ms before the fix).
        expect(await waitFor(() => looksAfter > 0, { intervalMs: 5, timeoutMs: 500 })).toBe(false);
      }
      texts.push(page.text);
    }
    expect(texts).toEqual(["one", "two", "three"]);
  }, 60_000);
});
