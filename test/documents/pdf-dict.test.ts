import { describe, expect, test } from "bun:test";
import { brotliCompressSync, deflateSync } from "node:zlib";
import { PdfLexer } from "../../src/documents/pdf-dict.ts";
import { pdfPages } from "../../src/documents/pdf-pages.ts";
import { checkPdfStreams } from "../../src/documents/pdf-streams.ts";
import { pdfOf } from "./pdf-raw.ts";

// The stream pass reads a stream's dictionary as pdf.js does (docs/agent.md "Documents",
// pdf-dict.ts): each dictionary below hides its real filter from a look for "/Filter" in the
// text, and pdf.js decodes the stream with that filter all the same (checked here by reading a
// page of text through it). A bomb behind each is refused by the pass, before pdf.js reads it.

const DICTIONARIES = [
  "/X (/Filter /DCTDecode) /Filter /FlateDecode",
  "/X (\\) /Filter /DCTDecode) /Filter /FlateDecode",
  "/N (/Subtype /Image) /Filter /FlateDecode",
  "/Filter /Fl#61teDecode",
  "/F#69lter /FlateDecode",
  "/F /FlateDecode",
  "%/Filter /DCTDecode\n /Filter /FlateDecode",
  "/Filter /FlateDecode /X (9 0 obj)",
  "/Filter /FlateDecode /X (9 0 obj << /Filter /DCTDecode /Q \\()",
  "/DecodeParms << /Filter /DCTDecode >> /Filter /FlateDecode",
  "/Filter /DCTDecode /Filter /FlateDecode",
];

async function textOf(pdf: Uint8Array): Promise<string> {
  let text = "";
  for await (const page of pdfPages(pdf)) text += page.text;
  return text;
}

const tooLarge = expect.objectContaining({ code: "invalid_request", data: { problem: "too_large" } });

describe("a stream's dictionary read as pdf.js reads it", () => {
  const page = deflateSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Inflated) Tj ET"));
  const bomb = deflateSync(Buffer.alloc(80 * 1024 * 1024, 0x20));

  for (const dict of DICTIONARIES) {
    test(`${JSON.stringify(dict)}: pdf.js inflates it, and the pass measures it`, async () => {
      expect(await textOf(pdfOf([{ dict, data: page }]))).toBe("Inflated");
      await expect(checkPdfStreams(pdfOf([{ dict, data: bomb }]))).rejects.toThrow(tooLarge);
    });
  }

  test("Brotli (PDF 2.0): pdf.js decodes it, and the pass measures it", async () => {
    const dict = "/Filter /BrotliDecode";
    const text = brotliCompressSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Brotli) Tj ET"));
    expect(await textOf(pdfOf([{ dict, data: text }]))).toBe("Brotli");
    const bomb = brotliCompressSync(Buffer.alloc(80 * 1024 * 1024, 0x20));
    await expect(checkPdfStreams(pdfOf([{ dict, data: bomb }]))).rejects.toThrow(tooLarge);
  });

  test("an image's stream is still passed over, and a page within the limit is read", async () => {
    await checkPdfStreams(pdfOf([{ dict: "/Subtype /Image /Filter /FlateDecode", data: bomb }]));
    await checkPdfStreams(pdfOf([{ dict: "/Filter /FlateDecode", data: page }]));
  });
});

describe("PdfLexer", () => {
  const dictOf = (text: string) => new PdfLexer(text, 0).dict();

  test("top-level entries only; names decoded; references, numbers, arrays and nested dictionaries", () => {
    const d = dictOf(
      "<< /A#42 /N#61me /L 12 0 R /N -3.5 /K [/X 4 0 R 7] /D << /Filter /Y >> /S (a(b)c\\)) /H <41> >>",
    );
    expect(d && [...d.keys()]).toEqual(["AB", "L", "N", "K", "D", "S", "H"]);
    expect(d?.get("AB")).toEqual({ kind: "name", name: "Name" });
    expect(d?.get("L")).toEqual({ kind: "ref", num: 12, gen: 0 });
    expect(d?.get("N")).toEqual({ kind: "number", value: -3.5 });
    expect(d?.get("K")).toEqual({
      kind: "array",
      items: [
        { kind: "name", name: "X" },
        { kind: "ref", num: 4, gen: 0 },
        { kind: "number", value: 7 },
      ],
    });
    expect(d?.get("D")).toEqual({
      kind: "dict",
      entries: new Map([["Filter", { kind: "name", name: "Y" }]]),
    });
  });

  test("two numbers without R are two numbers; a dictionary cut short or with a stray delimiter is none", () => {
    expect(new PdfLexer("[1 2]", 0).value()).toEqual({
      kind: "array",
      items: [
        { kind: "number", value: 1 },
        { kind: "number", value: 2 },
      ],
    });
    expect(dictOf("<< /A (unclosed >>")).toBeUndefined();
    expect(dictOf("<< /A 1")).toBeUndefined();
    expect(dictOf("<< /A ) >>")).toBeUndefined();
    expect(dictOf("/A 1 >>")).toBeUndefined();
  });

  test("a key given twice: the last, as pdf.js keeps it", () => {
    expect(dictOf("<< /F /A /F /B >>")?.get("F")).toEqual({ kind: "name", name: "B" });
  });
});
