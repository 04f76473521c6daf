import { brotliDecompress, constants, createInflateRaw, type inflate } from "node:zlib";
import { nextTurn } from "../util/next-turn.ts";
import { MAX_INFLATED_STREAM_BYTES, MAX_INFLATED_TOTAL_BYTES, MAX_PDF_STREAMS } from "./limits.ts";
import { ascii85Decode, asciiHexDecode, type Decoded, lzwDecode, runLengthDecode } from "./pdf-decoders.ts";
import { isRegular, PdfLexer, type PdfValue } from "./pdf-dict.ts";
import { documentProblem } from "./refusal.ts";

/** What one stream's decoding, and all of them, may come to (limits.ts); tests pass smaller ones. */
export interface InflateCaps {
  stream: number;
  total: number;
}
const INFLATE_CAPS: InflateCaps = { stream: MAX_INFLATED_STREAM_BYTES, total: MAX_INFLATED_TOTAL_BYTES };

/**
 * A PDF's streams measured before pdf.js reads it (docs/agent.md "Documents"): pdf.js decodes a
 * stream into one growing buffer with no bound, so a few MiB of zeros deflated (1,000 to 1), or
 * an LZW stream repeating its longest code (over 2,000 to 1), would take gigabytes. Each stream
 * (images aside: text extraction never decodes them) is run through its filter chain once, as
 * pdf.js would: Flate on zlib's thread, LZW and RunLength by counting (`pdf-decoders.ts`), each
 * step capped at MAX_INFLATED_STREAM_BYTES, and all of them at MAX_INFLATED_TOTAL_BYTES (`caps`);
 * over either, the file is refused. A filter measured nowhere (an image codec) ends the chain
 * there; a stream that does not decode (encrypted, damaged) is left to pdf.js, which reports it.
 * More than MAX_PDF_STREAMS streams is refused too. Runs on the PDF's thread (`pdf-worker.ts`).
 */
export async function checkPdfStreams(
  bytes: Uint8Array,
  maxStreams = MAX_PDF_STREAMS,
  caps: InflateCaps = INFLATE_CAPS,
): Promise<void> {
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = raw.toString("latin1");
  const pdf: Pdf = {
    text,
    headers: undefined,
    objects: undefined,
    resolved: new Map(),
    lineBreak: -1,
    skipped: 0,
  };
  let total = 0;
  let looked = 0;
  let seen = 0;
  let after = 0;
  for (let at = text.indexOf("stream", 0); at >= 0; at = text.indexOf("stream", at + 6)) {
    if (++looked % 256 === 0) await nextTurn();
    const stream = streamAt(pdf, at, after);
    if (stream === undefined) continue;
    // Keywords only: each stream's "endstream" counted too, 50,001 streams were "over 100,000".
    if (++seen > maxStreams) throw documentProblem("too_large", `the PDF has over ${maxStreams} streams`);
    after = at + 6;
    if (stream === "unmeasured") continue;
    const size = await decodedSize(raw.subarray(stream.start, stream.end), stream, caps.stream);
    total += size === "too_large" ? Number.POSITIVE_INFINITY : size;
    if (total > caps.total)
      throw documentProblem("too_large", "the PDF's streams decode past what is read (a compression bomb?)");
    at = stream.end;
    after = stream.end;
  }
}

/**
 * The file as text, with its object headers (`n g obj`, at their "obj", in file order) and what
 * a reference resolves to, both found once when first needed: looked for again per stream, a
 * few MB of streams made the pass quadratic (minutes on the PDF's thread, every later PDF
 * waiting for it).
 */
interface Pdf {
  text: string;
  headers: number[] | undefined;
  /** `n g` to the index of its header in `headers`, the last of a number winning as in an update. */
  objects: Map<string, number> | undefined;
  resolved: Map<string, PdfValue | undefined>;
  /** The first line break at or after the last keyword looked at (`dataStart`), the text's length when none. */
  lineBreak: number;
  /** The white space and comments `dataEnd` has looked past, all streams together. */
  skipped: number;
}

interface Stream {
  start: number;
  end: number;
  filters: string[];
  /** Each filter's /EarlyChange (LZW's; 1 where none is given). */
  earlyChange: number[];
}

/** Filter names as pdf.js takes them, abbreviations too. */
const FILTERS: Record<string, string> = {
  FlateDecode: "Flate",
  Fl: "Flate",
  LZWDecode: "LZW",
  LZW: "LZW",
  RunLengthDecode: "RL",
  RL: "RL",
  ASCIIHexDecode: "AHx",
  AHx: "AHx",
  ASCII85Decode: "A85",
  A85: "A85",
  BrotliDecode: "Br",
};

/** How many object headers before a stream are tried for the one whose dictionary ends at it. */
const HEADER_TRIES = 32;

/**
 * The data and filters of a non-image stream whose keyword is at `at`; "unmeasured" for a
 * keyword whose data is not (an image, no filter, no dictionary); undefined where "stream" is
 * not the keyword but part of a word ("endstream", "upstream", "streams"), as pdf.js's lexer
 * reads words whole.
 */
function streamAt(pdf: Pdf, at: number, after: number): Stream | "unmeasured" | undefined {
  const text = pdf.text;
  if (isRegular(text[at - 1]) || isRegular(text[at + 6])) return undefined;
  const dict = dictBefore(pdf, after, at);
  if (!dict) return "unmeasured";
  const subtype = dict.get("Subtype");
  if (subtype?.kind === "name" && subtype.name === "Image") return "unmeasured";
  // pdf.js reads /F before /Filter and /DP before /DecodeParms (the abbreviations of inline images).
  const filterValue = resolve(pdf, dict.get("F") ?? dict.get("Filter"));
  const items = filterValue?.kind === "array" ? filterValue.items : filterValue ? [filterValue] : [];
  const filters = items.map((item) => {
    const v = resolve(pdf, item);
    return v?.kind === "name" ? (FILTERS[v.name] ?? "other") : "other";
  });
  if (filters.length === 0) return "unmeasured";
  const params = resolve(pdf, dict.get("DP") ?? dict.get("DecodeParms"));
  const earlyChange = filters.map((_, i) => {
    const p = params?.kind === "array" ? resolve(pdf, params.items[i]) : params;
    const e = p?.kind === "dict" ? resolve(pdf, p.entries.get("EarlyChange")) : undefined;
    return e?.kind === "number" ? e.value : 1;
  });
  const start = dataStart(pdf, at + 6);
  const length = resolve(pdf, dict.get("Length"));
  return { start, end: dataEnd(pdf, length, start), filters, earlyChange };
}

/**
 * The stream's dictionary: read from the nearest object header (`n g obj`) since `after` whose
 * dictionary ends just before the `stream` keyword at `at` (a header written inside a string of
 * the dictionary does not), else from the nearest header alone. Each read stops at `at`: a
 * dictionary past it is not this stream's; a dictionary padded past any window still has its
 * /Filter read.
 */
function dictBefore(pdf: Pdf, after: number, at: number): Map<string, PdfValue> | undefined {
  const text = pdf.text;
  const headers = headersOf(pdf);
  let nearest: Map<string, PdfValue> | undefined;
  let tries = 0;
  for (let i = lastBefore(headers, at); i >= 0 && tries < HEADER_TRIES; i--) {
    const o = headers[i] as number;
    if (o < after) break;
    // The header's numbers after `after` too (`headersOf` looked back past it).
    if (!HEADER_END.test(text.slice(Math.max(after, o - 32), o))) continue;
    tries++;
    const lexer = new PdfLexer(text, o + 3, at);
    const dict = lexer.dict();
    if (dict) {
      lexer.skipWhite();
      if (lexer.pos === at) return dict;
      nearest ??= dict;
    }
  }
  return nearest;
}

/** `n g ` just before an "obj": the numbers of an object header. */
const HEADER_END = /(\d+)\s+(\d+)\s+$/;

/** Every object header's offset (at its "obj"), in file order. */
function headersOf(pdf: Pdf): number[] {
  if (pdf.headers) return pdf.headers;
  const text = pdf.text;
  const headers: number[] = [];
  for (let o = text.indexOf("obj"); o >= 0; o = text.indexOf("obj", o + 3)) {
    // White space before "obj" first: the regex only where it may match.
    if (WHITE_BEFORE.test(text[o - 1] ?? "") && HEADER_END.test(text.slice(Math.max(0, o - 32), o)))
      headers.push(o);
  }
  pdf.headers = headers;
  return headers;
}
const WHITE_BEFORE = /\s/;

/** The index of the last header before `at`, -1 when none. */
function lastBefore(headers: number[], at: number): number {
  let lo = 0;
  let hi = headers.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((headers[mid] as number) < at) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/**
 * An indirect reference's object (the value after its header, read no further than the next
 * header), else the value itself; each object read once.
 */
function resolve(pdf: Pdf, value: PdfValue | undefined): PdfValue | undefined {
  if (value?.kind !== "ref") return value;
  const key = `${value.num} ${value.gen}`;
  if (pdf.resolved.has(key)) return pdf.resolved.get(key);
  const headers = headersOf(pdf);
  pdf.objects ??= objectIndex(pdf.text, headers);
  const i = pdf.objects.get(key);
  const found =
    i === undefined ? undefined : new PdfLexer(pdf.text, (headers[i] as number) + 3, headers[i + 1]).value();
  pdf.resolved.set(key, found);
  return found;
}

function objectIndex(text: string, headers: number[]): Map<string, number> {
  const index = new Map<string, number>();
  for (const [i, o] of headers.entries()) {
    const m = HEADER_END.exec(text.slice(Math.max(0, o - 32), o));
    if (m) index.set(`${Number(m[1])} ${Number(m[2])}`, i);
  }
  return index;
}

/**
 * Where pdf.js starts the data: after the line break that ends the keyword's line, whatever is
 * before it (its `skipToNextLine`: `stream  % x` then a line break is a stream). Looked for once
 * per line, however many keywords are on it: keywords come in file order.
 */
function dataStart(pdf: Pdf, from: number): number {
  const text = pdf.text;
  if (pdf.lineBreak < from) {
    LINE_BREAK.lastIndex = from;
    pdf.lineBreak = LINE_BREAK.exec(text)?.index ?? text.length;
  }
  const at = pdf.lineBreak;
  return at + (text.startsWith("\r\n", at) ? 2 : at < text.length ? 1 : 0);
}
const LINE_BREAK = /[\r\n]/g;

/**
 * Where pdf.js ends the data: at /Length when the next token there is "endstream", past any white
 * space (NULs too) and comments, else at the first "endstream" (ENDSTREAM). The pass looked 64 characters on,
 * past JavaScript's white space, and fell back to the first "endstream", which a stored block of
 * the data can hold: it measured a few bytes, pdf.js inflated the bomb after them. Every stream's
 * /Length can point into the same padding: looked past more than the file's length in all, the
 * file is refused (no PDF writer pads a stream so; read again per stream, it was quadratic).
 */
function dataEnd(pdf: Pdf, length: PdfValue | undefined, start: number): number {
  const text = pdf.text;
  const n = length?.kind === "number" ? length.value : Number.NaN;
  if (Number.isSafeInteger(n) && n >= 0 && start + n <= text.length) {
    const lexer = new PdfLexer(text, start + n);
    lexer.skipWhite();
    pdf.skipped += lexer.pos - (start + n);
    if (pdf.skipped > text.length)
      throw documentProblem(
        "too_large",
        "the PDF's stream lengths point into the same padding over and over",
      );
    if (text.startsWith("endstream", lexer.pos) && !isRegular(text[lexer.pos + 9])) return start + n;
  }
  ENDSTREAM.lastIndex = start;
  return ENDSTREAM.exec(text)?.index ?? text.length;
}
/**
 * The end pdf.js looks for without a /Length: "endstream", or its typos "endsteam" and "endstrea"
 * before white space; looking for "endstream" alone, the pass read on past such an end, over the
 * next object's stream, which it then never measured.
 */
const ENDSTREAM = /end(?:stream|steam[ \t\r\n]|strea[ \t\r\n])/g;

/** What the chain decodes to, each step capped; an unmeasured filter ends it with what came before. */
async function decodedSize(data: Uint8Array, stream: Stream, cap: number): Promise<number | "too_large"> {
  let current = data;
  let size = data.byteLength;
  for (const [i, filter] of stream.filters.entries()) {
    const keep = i < stream.filters.length - 1;
    let step: Decoded | undefined;
    if (filter === "Flate") step = await flateStep(current, cap);
    else if (filter === "Br") step = await zlibStep(brotliDecompress as typeof inflate, current, cap);
    else if (filter === "LZW") step = lzwDecode(current, stream.earlyChange[i] ?? 1, cap, keep);
    else if (filter === "RL") step = runLengthDecode(current, cap, keep);
    else if (filter === "AHx") step = { size: 0, bytes: asciiHexDecode(current) };
    else if (filter === "A85") step = ascii85Decode(current, cap);
    if (step === "too_large") return "too_large";
    if (!step) return size;
    size = step.bytes?.byteLength ?? step.size;
    if (!step.bytes) return size;
    current = step.bytes;
  }
  return size;
}

/**
 * Flate as pdf.js inflates it: the zlib header checked as its FlateStream checks it (a stream it
 * refuses decodes to nothing), the deflated data after it inflated raw. pdf.js never reads the
 * Adler-32 after the data; zlib refused a wrong one, and the pass counted the stream as nothing.
 * Where zlib stops, pdf.js reads on or has read up to there, and that is counted: a match reaching
 * back past the start reads zeros in pdf.js (a window of them here), and a block it cannot read
 * ends the stream with the blocks before it in pdf.js's buffer (what came out, here).
 */
function flateStep(data: Uint8Array, cap: number): Promise<Decoded> {
  const cmf = data[0] ?? 0;
  const flg = data[1] ?? 0;
  if (data.byteLength < 2 || (cmf & 0x0f) !== 8 || ((cmf << 8) + flg) % 31 !== 0 || flg & 0x20)
    return Promise.resolve({ size: 0 });
  return new Promise((resolve) => {
    const inflater = createInflateRaw({ dictionary: ZEROS_BEFORE, finishFlush: constants.Z_SYNC_FLUSH });
    const out: Buffer[] = [];
    let size = 0;
    const done = (decoded: Decoded) => {
      inflater.destroy();
      resolve(decoded);
    };
    const made = () => done({ size, bytes: Buffer.concat(out, size) });
    inflater.on("data", (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > cap) done("too_large");
      else out.push(chunk);
    });
    inflater.on("error", made);
    inflater.on("end", made);
    inflater.end(data.subarray(2));
  });
}

/** What precedes a Flate stream's first byte for a match that reaches back past it (as far as one may). */
const ZEROS_BEFORE = new Uint8Array(32 * 1024);

/** What a zlib decoder made, capped at `cap`: past it "too_large"; data it refuses decodes to nothing. */
function zlibStep(decode: typeof inflate, data: Uint8Array, cap: number): Promise<Decoded> {
  return new Promise((resolve) => {
    decode(data, { maxOutputLength: cap }, (err, out) => {
      if (err) resolve(err instanceof RangeError ? "too_large" : { size: 0 });
      else resolve({ size: out.byteLength, bytes: out });
    });
  });
}
