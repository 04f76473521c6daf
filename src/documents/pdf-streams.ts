import { constants, inflate } from "node:zlib";
import { MAX_INFLATED_STREAM_BYTES, MAX_INFLATED_TOTAL_BYTES, MAX_PDF_STREAMS } from "./limits.ts";
import { documentProblem } from "./refusal.ts";
import { nextTurn } from "./turn.ts";

/**
 * A PDF's Flate streams measured before pdf.js reads it (docs/agent.md "Documents"): pdf.js
 * inflates a stream into one growing buffer with no bound, so a few MiB of zeros deflated
 * (1,000 to 1) would take gigabytes. Each stream (images aside: text extraction never decodes
 * them) is inflated here once, on zlib's thread, capped at MAX_INFLATED_STREAM_BYTES, and all of
 * them at MAX_INFLATED_TOTAL_BYTES; over either, the file is refused. A stream that does not
 * inflate (encrypted, damaged) is left to pdf.js, which reports it. More than MAX_PDF_STREAMS
 * streams is refused too, and the loop is given back every 256 of them.
 */
export async function checkFlateStreams(bytes: Uint8Array): Promise<void> {
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = raw.toString("latin1");
  let total = 0;
  let seen = 0;
  for (let at = text.indexOf("stream", 0); at >= 0; at = text.indexOf("stream", at + 6)) {
    if (++seen > MAX_PDF_STREAMS)
      throw documentProblem("too_large", `the PDF has over ${MAX_PDF_STREAMS} streams`);
    if (seen % 256 === 0) await nextTurn();
    const stream = flateStreamAt(text, at);
    if (!stream) continue;
    const size = await inflatedSize(raw.subarray(stream.start, stream.end));
    total += size === "too_large" ? Number.POSITIVE_INFINITY : size;
    if (total > MAX_INFLATED_TOTAL_BYTES)
      throw documentProblem("too_large", "the PDF's streams inflate past what is read (a compression bomb?)");
    at = stream.end;
  }
}

/** The data of a Flate, non-image stream whose keyword is at `at`, or undefined. */
function flateStreamAt(text: string, at: number): { start: number; end: number } | undefined {
  if (text[at - 1] === "d") return undefined; // "endstream"
  const eol = text.startsWith("\r\n", at + 6) ? 2 : text[at + 6] === "\n" || text[at + 6] === "\r" ? 1 : 0;
  if (eol === 0) return undefined;
  // The stream's dictionary: what follows the last "obj" in the KiB before the keyword.
  const before = text.slice(Math.max(0, at - 1024), at);
  const dict = before.slice(Math.max(0, before.lastIndexOf("obj")));
  if (!/\/FlateDecode\b/.test(dict) || /\/Subtype\s*\/Image\b/.test(dict)) return undefined;
  const start = at + 6 + eol;
  const end = text.indexOf("endstream", start);
  return end < 0 ? { start, end: text.length } : { start, end };
}

function inflatedSize(data: Uint8Array): Promise<number | "too_large"> {
  return new Promise((resolve) => {
    inflate(
      data,
      { maxOutputLength: MAX_INFLATED_STREAM_BYTES, finishFlush: constants.Z_SYNC_FLUSH },
      (err, out) => {
        if (err) resolve(err instanceof RangeError ? "too_large" : 0);
        else resolve(out.byteLength);
      },
    );
  });
}
