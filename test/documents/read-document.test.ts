import { describe, expect, test } from "bun:test";
import { deflateSync } from "node:zlib";
import { MAX_DOCUMENT_CHUNKS } from "../../src/documents/limits.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import type { IndexProgress } from "../../src/protocol/documents.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";
import { minimalPdf } from "../fixtures/pdf-writer.ts";

/** readDocument over a fake file edge: the path names bytes in memory. */
const fromBytes = (bytes: Uint8Array, name = "doc", onProgress?: (p: IndexProgress) => void) =>
  readDocument({ path: name }, { readFile: async () => bytes, onProgress });

const problem = (p: string) => expect.objectContaining({ code: "invalid_request", data: { problem: p } });

describe("reading a document", () => {
  test("a PDF's text layer, page by page, each chunk with its page", async () => {
    const pdf = minimalPdf([["First page (one)", "more of it"], ["Second page"]]);
    const seen: IndexProgress[] = [];
    const read = await fromBytes(pdf, "scan.txt", (p) => seen.push(p));
    expect(read).toMatchObject({ format: "pdf", pages: 2, bytes: pdf.byteLength });
    expect(read.chunks).toEqual([
      { index: 0, text: "First page (one)\nmore of it", heading_path: [], page: 1 },
      { index: 1, text: "Second page", heading_path: [], page: 2 },
    ]);
    expect(seen.filter((p) => p.phase === "reading").map((p) => [p.done, p.total])).toContainEqual([2, 2]);
    expect(seen.at(-1)?.phase).toBe("indexing");
  });

  test("an encrypted PDF, an image-only one, a truncated one: each refused, saying why", async () => {
    await expect(fromBytes(minimalPdf([["secret"]], { encrypt: true }))).rejects.toThrow(
      problem("encrypted"),
    );
    await expect(fromBytes(minimalPdf([["x"]], { encrypt: true }))).rejects.toThrow(/encrypted/);
    await expect(fromBytes(minimalPdf([["x"], ["y"]], { imageOnly: true }))).rejects.toThrow(
      problem("no_text"),
    );
    const whole = minimalPdf([["cut short"]]);
    await expect(fromBytes(whole.slice(0, whole.length / 2))).rejects.toThrow(problem("damaged"));
    await expect(fromBytes(new TextEncoder().encode("%PDF-1.4\n garbage"))).rejects.toThrow(
      problem("damaged"),
    );
  });

  test("a Flate bomb in a PDF is refused before pdf.js inflates it", async () => {
    const bomb = deflateSync(Buffer.alloc(80 * 1024 * 1024, 0x20)); // 80 MiB of spaces, ~80 KiB deflated
    const head = "%PDF-1.4\n1 0 obj\n<< /Length 0 /Filter /FlateDecode >>\nstream\n";
    const bytes = Buffer.concat([
      Buffer.from(head, "latin1"),
      bomb,
      Buffer.from("\nendstream\nendobj\n%%EOF\n"),
    ]);
    await expect(fromBytes(bytes)).rejects.toThrow(problem("too_large"));
  });

  test("Markdown, HTML and text from bytes; the name decides only Markdown over text", async () => {
    const md = await fromBytes(new TextEncoder().encode("# Guide\n\nStep one."), "guide.txt");
    expect(md).toMatchObject({ format: "markdown", encoding: "utf-8" });
    expect(md.chunks[0]).toMatchObject({ text: "Step one.", heading_path: ["Guide"] });
    const html = await fromBytes(new TextEncoder().encode("<html><h2>H</h2><p>x &amp; y</p></html>"), "a.md");
    expect(html).toMatchObject({ format: "html", chunks: [{ text: "x & y", heading_path: ["H"] }] });
    const latin = await fromBytes(Buffer.from([0x63, 0x61, 0x66, 0xe9]), "notes");
    expect(latin).toMatchObject({ format: "text", encoding: "latin-1", chunks: [{ text: "café" }] });
    const given = await readDocument(
      { text: "plain words", name: "n.md" },
      { readFile: async () => new Uint8Array() },
    );
    expect(given).toMatchObject({ format: "markdown", bytes: 11, chunks: [{ text: "plain words" }] });
    expect(given.encoding).toBeUndefined();
  });

  test("binary data is unsupported_format; blank text has nothing to index", async () => {
    const bin = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 0, 0, 0, 1]);
    await expect(fromBytes(bin, "a.txt")).rejects.toThrow(
      expect.objectContaining({ code: "invalid_request", data: { reason: "unsupported_format" } }),
    );
    await expect(fromBytes(new TextEncoder().encode("  \n\n  "))).rejects.toThrow(problem("no_text"));
    await expect(fromBytes(new TextEncoder().encode("<html><script>x()</script></html>"))).rejects.toThrow(
      problem("no_text"),
    );
  });
});

describe("a document's chunks are bounded", () => {
  // Every heading starts a chunk: 16 Mi characters of "# a\nb\n" were 2.8 million chunks
  // (536 MB held while read, a row and a vector each), where the text limit means ~13,000.
  test("a document of tiny sections is refused by its chunk count, before it is all stored", async () => {
    const section = "# a\nb\n";
    const handed: number[] = [];
    const read = readDocument(
      { text: section.repeat(MAX_DOCUMENT_CHUNKS + 1), name: "n.md" },
      {
        readFile: async () => new Uint8Array(),
        onChunks: async (chunks) => {
          handed.push(chunks.length);
        },
      },
    );
    await expect(read).rejects.toThrow(problem("too_large"));
    expect(handed.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(MAX_DOCUMENT_CHUNKS);
    const most = await readDocument(
      { text: section.repeat(MAX_DOCUMENT_CHUNKS), name: "n.md" },
      { readFile: async () => new Uint8Array() },
    );
    expect(most.chunks.length).toBe(MAX_DOCUMENT_CHUNKS);
  });
});

describe("reading gives the event loop back", () => {
  /** Turns of the event loop taken while `work` runs: a ping is answered in any one of them. */
  const turnsOf = async (work: Promise<unknown>) => (await turnsDuring(() => work)).turns;

  test("a large Markdown document, an HTML one and a PDF of many pages", async () => {
    const para = "A sentence of some length that goes on. ".repeat(20);
    const md = Array.from({ length: 2000 }, (_, i) => `## Part ${i}\n\n${para}\n\n${para}`).join("\n\n");
    expect(await turnsOf(fromBytes(new TextEncoder().encode(md), "big.md"))).toBeGreaterThan(20);
    const html = `<html>${Array.from({ length: 5000 }, () => `<p>${para}</p>`).join("")}</html>`;
    expect(await turnsOf(fromBytes(new TextEncoder().encode(html)))).toBeGreaterThan(20);
    const pdf = minimalPdf(Array.from({ length: 60 }, (_, i) => [`Page ${i} text`]));
    expect(await turnsOf(fromBytes(pdf))).toBeGreaterThanOrEqual(60);
  });
});
