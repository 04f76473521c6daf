import { describe, expect, test } from "bun:test";
import { decodeText } from "../../src/documents/decode.ts";
import { isPdf, textFormat } from "../../src/documents/format.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import { minimalPdf } from "../fixtures/pdf-writer.ts";

const utf8 = (s: string) => new TextEncoder().encode(s);

describe("a document's format, from its bytes", () => {
  test("a PDF by %PDF-, whatever it is called", () => {
    expect(isPdf(minimalPdf([["hello"]]))).toBe(true);
    expect(isPdf(utf8("\r\n%PDF-1.7\n"))).toBe(true);
    expect(isPdf(utf8("notes on the %PDF-1.4 header"))).toBe(false);
  });

  test("HTML by a doctype or a tag at the start (past comments), not by the name", () => {
    expect(textFormat("<!DOCTYPE html><html><body>x</body></html>", "notes.txt")).toBe("html");
    expect(textFormat("  <!-- generated -->\n<html lang=en>", "a.md")).toBe("html");
    expect(textFormat("<p>one</p>")).toBe("html");
    expect(textFormat("a < b and <c> is not a tag we know")).toBe("text");
  });

  test("XHTML past its XML declaration, and a page that opens with its styles or scripts, is HTML: its markup never indexed", async () => {
    const xhtml = `<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "x.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml"><head><script>var k = "SCRIPTWORD";</script></head><body><p>Body words</p></body></html>`;
    expect(textFormat(xhtml)).toBe("html");
    expect(textFormat("<style>p { color: red }</style><div>hi</div>")).toBe("html");
    expect(textFormat("<script>track()</script><p>hi</p>")).toBe("html");
    expect(textFormat('<link rel="stylesheet" href="a.css"><header>hi</header>')).toBe("html");
    const read = await readDocument({ text: xhtml }, { readFile: async () => new Uint8Array() });
    expect(read.chunks.map((c) => c.text)).toEqual(["Body words"]);
    // A declaration that never closes leaves the text as it was.
    expect(textFormat("<? not closed <p>x")).toBe("text");
  });

  test("Markdown by its name or by a heading; otherwise plain text", () => {
    expect(textFormat("no headings here", "README.md")).toBe("markdown");
    expect(textFormat("no headings here", "x.MARKDOWN")).toBe("markdown");
    expect(textFormat("intro\n\n## Setup\nsteps")).toBe("markdown");
    expect(textFormat("#include <stdio.h>\nint main;")).toBe("text");
    expect(textFormat("plain words", "a.txt")).toBe("text");
  });
});

describe("a text document's encoding", () => {
  test("UTF-8 with or without a BOM", async () => {
    expect(await decodeText(utf8("héllo"))).toEqual({ text: "héllo", encoding: "utf-8" });
    expect(await decodeText(new Uint8Array([0xef, 0xbb, 0xbf, ...utf8("héllo")]))).toEqual({
      text: "héllo",
      encoding: "utf-8",
    });
  });

  test("UTF-16 LE and BE by their BOM", async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("naïve 日本", "utf16le")]);
    expect(await decodeText(le)).toEqual({ text: "naïve 日本", encoding: "utf-16le" });
    const be = Buffer.from(le);
    be.swap16();
    expect(await decodeText(be)).toEqual({ text: "naïve 日本", encoding: "utf-16be" });
  });

  test("Latin-1 when the bytes are not valid UTF-8 (read as Windows-1252, as browsers do)", async () => {
    const bytes = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x93, 0x71, 0x94]); // café “q”
    expect(await decodeText(bytes)).toEqual({ text: "café “q”", encoding: "latin-1" });
  });

  test("binary data (NULs, control bytes) is unsupported_format", async () => {
    const nul = decodeText(new Uint8Array([0x41, 0x00, 0x42]));
    await expect(nul).rejects.toThrow(
      expect.objectContaining({ code: "invalid_request", data: { reason: "unsupported_format" } }),
    );
    const noise = new Uint8Array(4096).map((_, i) => (i * 7919) % 256 || 1);
    await expect(decodeText(noise)).rejects.toThrow(
      expect.objectContaining({ data: { reason: "unsupported_format" } }),
    );
    // UTF-16 without a BOM is full of NULs: refused rather than guessed.
    await expect(decodeText(Buffer.from("abc", "utf16le"))).rejects.toThrow(/not a format/);
  });
});
