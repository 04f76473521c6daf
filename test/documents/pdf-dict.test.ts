import { describe, expect, test } from "bun:test";
import { brotliCompressSync, constants, deflateRawSync, deflateSync } from "node:zlib";
import {
  MAX_INFLATED_STREAM_BYTES,
  MAX_INFLATED_TOTAL_BYTES,
  MAX_PDF_NESTING,
  MAX_PDF_STREAMS,
} from "../../src/documents/limits.ts";
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
  // "stream" in a word is no keyword (each was taken for one, and the real one after it hidden).
  "/X (streams) /Filter /FlateDecode",
  "/X (upstream\n) /Filter /FlateDecode",
];

async function textOf(pdf: Uint8Array): Promise<string> {
  let text = "";
  for await (const page of pdfPages(pdf)) text += page.text;
  return text;
}

/**
 * The bombs below are measured against limits.ts's caps scaled down (1/64: 1 MiB a stream, 8 MiB in
 * all), their sizes with them (`mib`): the same pass and the same refusals, 64 times less to inflate.
 */
const SCALE = 64;
const CAPS = { stream: MAX_INFLATED_STREAM_BYTES / SCALE, total: MAX_INFLATED_TOTAL_BYTES / SCALE };
/** `n` MiB at the tests' scale. */
const mib = (n: number) => (n * 1024 * 1024) / SCALE;
const measured = (pdf: Uint8Array) => checkPdfStreams(pdf, MAX_PDF_STREAMS, CAPS);

const tooLarge = expect.objectContaining({ code: "invalid_request", data: { problem: "too_large" } });

describe("a stream's dictionary read as pdf.js reads it", () => {
  const page = deflateSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Inflated) Tj ET"));
  const bomb = deflateSync(Buffer.alloc(mib(80), 0x20));

  for (const dict of DICTIONARIES) {
    test(`${JSON.stringify(dict)}: pdf.js inflates it, and the pass measures it`, async () => {
      expect(await textOf(pdfOf([{ dict, data: page }]))).toBe("Inflated");
      await expect(measured(pdfOf([{ dict, data: bomb }]))).rejects.toThrow(tooLarge);
    });
  }

  // pdf.js starts the data after the keyword's line, whatever else is on it; the pass looked for
  // a line break right after the keyword and passed over the stream.
  for (const keyword of ["stream \n", "stream  % a comment\r\n", "stream\t\r"]) {
    test(`${JSON.stringify(keyword)}: pdf.js inflates it, and the pass measures it`, async () => {
      const dict = "/Filter /FlateDecode";
      expect(await textOf(pdfOf([{ dict, data: page, keyword }]))).toBe("Inflated");
      await expect(measured(pdfOf([{ dict, data: bomb, keyword }]))).rejects.toThrow(tooLarge);
    });
  }

  test("Brotli (PDF 2.0): pdf.js decodes it, and the pass measures it", async () => {
    const dict = "/Filter /BrotliDecode";
    const text = brotliCompressSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Brotli) Tj ET"));
    expect(await textOf(pdfOf([{ dict, data: text }]))).toBe("Brotli");
    const bomb = brotliCompressSync(Buffer.alloc(mib(80), 0x20));
    await expect(measured(pdfOf([{ dict, data: bomb }]))).rejects.toThrow(tooLarge);
  });

  test("an image's stream is still passed over, and a page within the limit is read", async () => {
    await measured(pdfOf([{ dict: "/Subtype /Image /Filter /FlateDecode", data: bomb }]));
    await measured(pdfOf([{ dict: "/Filter /FlateDecode", data: page }]));
  });
});

describe("a stream's end found as pdf.js finds it", () => {
  // pdf.js ends the data at /Length when "endstream" follows it past any white space (NULs too)
  // and comments; the pass looked 64 characters on for it past JavaScript's white space only, and
  // failing that ended the data at the first "endstream", which a stored block of the data itself
  // can hold: the pass measured a few bytes, pdf.js inflated the bomb after them.
  const stored = (text: string) => {
    const t = Buffer.from(text, "latin1");
    return Buffer.concat([Buffer.from([0, t.length, 0, ~t.length & 0xff, 0xff]), t]);
  };
  // zlib's header, a stored block saying "endstream", the deflated rest (pdf.js checks no Adler-32).
  const flate = (rest: Buffer) =>
    Buffer.concat([Buffer.from([0x78, 0x01]), stored("endstream\n"), deflateRawSync(rest), Buffer.alloc(4)]);
  const page = flate(Buffer.from("BT /F1 12 Tf 72 700 Td (Inflated) Tj ET"));
  const bomb = flate(Buffer.alloc(mib(80), 0x20));
  // The padding is after the data, before pdfOf's "\nendstream"; /Length (the last one read) says where the data ends.
  const of = (data: Buffer, padding: string) =>
    pdfOf([
      {
        dict: `/Filter /FlateDecode /Length ${data.byteLength}`,
        data: Buffer.concat([data, Buffer.from(padding, "latin1")]),
      },
    ]);

  // Where /Length is wrong, pdf.js ends the data at the first "endstream", or "endsteam" or
  // "endstrea" then a space (its typos); the pass looked for "endstream" alone, and stepped over
  // the next object's stream to its "endstream", never measuring it.
  test('"endstrea " ends a stream whose /Length is wrong: the stream after it is measured', async () => {
    const of = (data: Uint8Array) => {
      const pdf = Buffer.from(
        pdfOf([
          { dict: "/Filter /FlateDecode /Length 0", data: Buffer.from("xx endstrea ") },
          { dict, data },
        ]),
      );
      // The first stream's own "endstream" blanked, the offsets kept.
      const at = pdf.indexOf("endstrea \nendstream");
      pdf.fill(0x20, at + 10, at + 19);
      return pdf;
    };
    const dict = "/Filter /FlateDecode";
    expect(await textOf(of(page))).toBe("Inflated");
    await expect(measured(of(bomb))).rejects.toThrow(tooLarge);
  });

  for (const padding of ["\n% a comment", "\0\0\0", " ".repeat(100)]) {
    test(`${JSON.stringify(padding)} before "endstream": pdf.js inflates the data whole, and the pass measures it`, async () => {
      expect(await textOf(of(page, padding))).toBe("Inflated");
      await expect(measured(of(bomb, padding))).rejects.toThrow(tooLarge);
    });
  }
});

describe("a Flate stream read as pdf.js reads it: no Adler-32 checked", () => {
  // zlib refuses a stream whose checksum is wrong, and the pass counted what it refused as
  // nothing; pdf.js never reads the checksum and inflates it whole. Ten streams of 60 MiB each
  // (under the one-stream cap) with a wrong checksum were 600 MiB the total cap never saw.
  const badSum = (data: Buffer) => {
    const z = Buffer.from(deflateSync(data));
    z[z.length - 1] = (z[z.length - 1] as number) ^ 0xff;
    return z;
  };
  const dict = "/Filter /FlateDecode";

  test("pdf.js reads its text; the pass counts every stream", async () => {
    expect(
      await textOf(pdfOf([{ dict, data: badSum(Buffer.from("BT /F1 12 Tf 72 700 Td (Summed) Tj ET")) }])),
    ).toBe("Summed");
    const page = { dict, data: badSum(Buffer.alloc(mib(60), 0x20)) };
    await expect(measured(pdfOf(Array.from({ length: 10 }, () => page)))).rejects.toThrow(tooLarge);
  });
});

describe("a Flate stream zlib refuses midway, read as pdf.js reads it", () => {
  // zlib refused the whole stream at what it could not read, and the pass counted it as nothing.
  const dict = "/Filter /FlateDecode";
  const zlibOf = (raw: Buffer) => Buffer.concat([Buffer.from([0x78, 0x9c]), raw]);
  const tenOf = (data: Buffer) => pdfOf(Array.from({ length: 10 }, () => ({ dict, data })));

  // A match reaching back past the data's start (its words deflated after a preset dictionary):
  // pdf.js reads zeros there and inflates the rest. Ten streams of 60 MiB were 600 MiB unseen.
  const reachingBack = (data: Buffer) => zlibOf(deflateRawSync(data, { dictionary: Buffer.alloc(64) }));

  test("a match before the start: pdf.js reads the text after it; the pass counts it", async () => {
    const text = Buffer.concat([Buffer.alloc(64), Buffer.from("BT /F1 12 Tf 72 700 Td (Behind) Tj ET")]);
    expect(await textOf(pdfOf([{ dict, data: reachingBack(text) }]))).toBe("Behind");
    await expect(measured(tenOf(reachingBack(Buffer.alloc(mib(60)))))).rejects.toThrow(tooLarge);
  });

  // A block of a type there is none of, last: pdf.js's FlateStream has inflated every block
  // before it into its buffer by then (it throws only on reaching that one).
  test("a bad block at the end: the blocks before it are counted", async () => {
    const badEnd = (data: Buffer) =>
      zlibOf(
        Buffer.concat([deflateRawSync(data, { finishFlush: constants.Z_SYNC_FLUSH }), Buffer.from([0x07])]),
      );
    await expect(measured(tenOf(badEnd(Buffer.alloc(mib(60), 0x20))))).rejects.toThrow(tooLarge);
  });
});

describe("the stream pass is linear in the file, whatever its streams", () => {
  // Each dictionary, header and reference was read to the end of the file once per stream (an
  // unclosed string or hex string, a `lastIndexOf("obj")` back to the file's start): a 4 MB file
  // held the PDF's thread, and every PDF after it, for minutes. Each below reads in well under a
  // second now, and ran for minutes before (past the test's timeout).
  const pass = (body: string) => checkPdfStreams(Buffer.from(`%PDF-1.4\n${body}`, "latin1"));

  test("a header per stream whose dictionary never closes (a string, a hex string)", async () => {
    await pass("1 0 obj <</Filter /FlateDecode /A (stream\n".repeat(99_000));
    await pass("1 0 obj <</Filter /FlateDecode /A <stream\n".repeat(99_000));
  });

  test("keywords on one line that never ends", async () => {
    await pass("1 0 obj <</Filter /FlateDecode>> stream ".repeat(99_000));
  });

  test("streams far from any header", async () => {
    await pass(`1 0 obj\n${`${"x".repeat(100)}stream\n`.repeat(99_000)}`);
  });

  test("streams whose /Length each points into the same padding, a token other than endstream after it", async () => {
    // Looked past per stream, 1,000 streams over 10 MB of padding were 10 G steps; refused instead.
    let body = "";
    const ends: number[] = [];
    for (let i = 1; i <= 1000; i++) {
      body += `${i} 0 obj <</Filter /FlateDecode /Length ${"#".repeat(10)}>>stream\n`;
      ends.push(body.length);
      body += "x\nendstream endobj\n";
    }
    const padding = body.length;
    let i = 0;
    body = body.replace(/#{10}/g, () => String(padding - (ends[i++] as number)).padStart(10, "0"));
    await expect(pass(`${body}${" ".repeat(10 * 1024 * 1024)}x`)).rejects.toThrow(tooLarge);
  });

  test("streams whose /Length is one large object that never closes", async () => {
    const stream = "2 0 obj <</Filter /FlateDecode /Length 9 0 R>>stream\nxx\nendstream endobj\n";
    await pass(`9 0 obj (${"x".repeat(4 * 1024 * 1024)}\n${stream.repeat(10_000)}`);
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

  test("never reads past its end: what closes only after it is not there", () => {
    const text = "<< /A (x) /B <41> /C [1] >> stream";
    expect(new PdfLexer(text, 0, text.indexOf(" stream")).dict()?.size).toBe(3);
    for (const cut of ["(x", "<4", "[1", ">>"])
      expect(new PdfLexer(text, 0, text.indexOf(cut) + cut.length - 1).dict()).toBeUndefined();
  });
});

describe("nesting past MAX_PDF_NESTING is refused, not a stack overflow", () => {
  // Each level a call, in the pass's lexer as in pdf.js's parser: 100,000 nested dictionaries
  // overflowed the PDF's thread's stack, and the file failed `damaged` with "Maximum call stack size exceeded".
  const page = deflateSync(Buffer.from("BT /F1 12 Tf 72 700 Td (Nested) Tj ET"));
  const dicts = (n: number) => `/X ${"<< /A ".repeat(n)}1${" >>".repeat(n)} /Filter /FlateDecode`;
  const arrays = (n: number) => `/X ${"[".repeat(n)}${"]".repeat(n)} /Filter /FlateDecode`;
  const tooDeep = expect.objectContaining({
    code: "invalid_request",
    message: expect.stringContaining(`over ${MAX_PDF_NESTING} deep`),
    data: { problem: "too_large" },
  });

  for (const [what, nest] of [
    ["dictionaries", dicts],
    ["arrays", arrays],
  ] as const) {
    test(`100,000 nested ${what}: the pass refuses them, and the read with it`, async () => {
      const pdf = pdfOf([{ dict: nest(100_000), data: page }]);
      await expect(checkPdfStreams(pdf)).rejects.toThrow(tooDeep);
      await expect(textOf(pdf)).rejects.toThrow(tooDeep);
    });

    test(`${what} nested to the limit are read`, async () => {
      expect(await textOf(pdfOf([{ dict: nest(MAX_PDF_NESTING - 1), data: page }]))).toBe("Nested");
    });
  }

  test("nesting the pass never reads (the trailer's) is refused as pdf.js meets it", async () => {
    const pdf = Buffer.from(pdfOf([{ dict: "/Filter /FlateDecode", data: page }])).toString("latin1");
    const nested = pdf.replace(
      "/Root 1 0 R >>",
      `/Root 1 0 R /X ${"<< /A ".repeat(100_000)}1${" >>".repeat(100_000)} >>`,
    );
    await expect(textOf(Buffer.from(nested, "latin1"))).rejects.toThrow(
      expect.objectContaining({
        message: expect.stringContaining("too deep"),
        data: { problem: "too_large" },
      }),
    );
  });
});

describe("the stream pass counts streams, not the word", () => {
  // Every "stream" in the file was counted, each stream's "endstream" too: a PDF of 50,001
  // streams was refused as over the 100,000 the docs allow.
  const streams = (n: number) => {
    let body = "%PDF-1.4\n";
    for (let i = 1; i <= n; i++) body += `${i} 0 obj <</Length 1>>stream\nx\nendstream endobj\n`;
    return Buffer.from(body, "latin1");
  };

  // Under a limit of its own: the docs' 100,000 took this box 0.3 s alone and over 30 s once in a
  // loaded suite; the count is the same whatever the limit.
  test("a PDF of 6,000 streams passes a limit of 10,000; one over the limit is refused", async () => {
    await checkPdfStreams(streams(6_000), 10_000);
    await checkPdfStreams(streams(10_000), 10_000);
    await expect(checkPdfStreams(streams(10_001), 10_000)).rejects.toThrow(tooLarge);
    expect(MAX_PDF_STREAMS).toBe(100_000);
  });
});
