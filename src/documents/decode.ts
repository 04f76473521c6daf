import type { TextEncoding } from "../protocol/documents.ts";
import { nextTurn } from "../util/next-turn.ts";
import { MAX_TEXT_CHARS } from "./limits.ts";
import { tooMuchText, unsupportedFormat } from "./refusal.ts";

/**
 * A text document's bytes as text (docs/agent.md "Documents"): a UTF-16 byte order mark says
 * UTF-16 (LE or BE); otherwise UTF-8 (a BOM dropped) when the bytes are valid UTF-8, else
 * Latin-1, read as browsers read it (its Windows-1252 superset). Bytes that decode to NULs or
 * many control characters are binary, not text: `unsupported_format`. Off the main loop
 * (docs/agent.md "Off the main loop"): binary is looked for in the raw bytes before decoding,
 * the decoding goes a slice at a time with a turn of the loop between, and text past
 * MAX_TEXT_CHARS is refused as soon as the decoded part passes it.
 */
export interface DecodedText {
  text: string;
  encoding: TextEncoding;
}

/** Bytes decoded between two turns of the loop: about a millisecond's work. */
const DECODE_SLICE_BYTES = 1024 * 1024;

export async function decodeText(bytes: Uint8Array): Promise<DecodedText> {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return checked(await decode("utf-16le", bytes), "utf-16le");
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return checked(await decode("utf-16be", bytes), "utf-16be");
  if (rawLooksBinary(bytes)) throw unsupportedFormat("binary data");
  // `fatal` makes invalid UTF-8 an error instead of U+FFFD; the BOM is dropped by default.
  const utf8 = await decode("utf-8", bytes).catch((e: unknown) => {
    if (e instanceof TypeError) return undefined;
    throw e;
  });
  if (utf8 !== undefined) return checked(utf8, "utf-8");
  // Windows-1252 makes a character of each byte: the size is known before decoding again.
  if (bytes.byteLength > MAX_TEXT_CHARS) throw tooMuchText(bytes.byteLength, MAX_TEXT_CHARS);
  return checked(await decode("windows-1252", bytes), "latin-1");
}

function checked(text: string, encoding: TextEncoding): DecodedText {
  if (looksBinary(text)) throw unsupportedFormat("binary data");
  return { text, encoding };
}

type Label = "utf-8" | "utf-16le" | "utf-16be" | "windows-1252";

/**
 * The bytes decoded a slice at a time (UTF-8 fatally), a turn of the loop between slices; past
 * MAX_TEXT_CHARS refused then (Latin-1 would have as many characters or more).
 */
async function decode(label: Label, bytes: Uint8Array): Promise<string> {
  const decoder = new TextDecoder(label, { fatal: label === "utf-8" });
  const parts: string[] = [];
  let chars = 0;
  for (let at = 0; at < bytes.byteLength; at += DECODE_SLICE_BYTES) {
    if (at > 0) await nextTurn();
    const part = decoder.decode(bytes.subarray(at, at + DECODE_SLICE_BYTES), { stream: true });
    chars += part.length;
    if (chars > MAX_TEXT_CHARS) throw tooMuchText(chars, MAX_TEXT_CHARS);
    // UTF-16's NULs are two bytes: looked for as they are decoded, not after.
    if (part.includes("\u0000")) throw unsupportedFormat("binary data");
    parts.push(part);
  }
  parts.push(decoder.decode());
  return parts.join("");
}

/** Control characters text does not hold: C0 but tab, newlines, form feed; DEL; C1. */
const CONTROL = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/g;
/** Past this share of controls in the first 64 KiB, it is data, not text. */
const MAX_CONTROL_SHARE = 0.01;
const HEAD_CHARS = 64 * 1024;

function looksBinary(text: string): boolean {
  if (text.includes("\u0000")) return true;
  const head = text.slice(0, HEAD_CHARS);
  const controls = head.match(CONTROL)?.length ?? 0;
  return controls > head.length * MAX_CONTROL_SHARE;
}

/**
 * `looksBinary`'s verdict on UTF-8 or Latin-1 bytes before they are decoded, where the bytes
 * alone decide it: a NUL byte is a NUL either way; C0 controls and DEL are one byte each either
 * way, and the first 64 Ki characters span at least the first 64 KiB, so more than 1% of those
 * bytes being such controls is binary whichever decoding follows (C1 waits for it).
 */
function rawLooksBinary(bytes: Uint8Array): boolean {
  if (bytes.includes(0)) return true;
  const head = bytes.subarray(0, HEAD_CHARS);
  let controls = 0;
  for (const b of head) if (b < 0x09 || (b > 0x0d && b < 0x20) || b === 0x7f) controls++;
  return controls > head.length * MAX_CONTROL_SHARE;
}
