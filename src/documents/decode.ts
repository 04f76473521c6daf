import type { TextEncoding } from "../protocol/documents.ts";
import { unsupportedFormat } from "./refusal.ts";

/**
 * A text document's bytes as text (docs/agent.md "Documents"): a UTF-16 byte order mark says
 * UTF-16 (LE or BE); otherwise UTF-8 (a BOM dropped) when the bytes are valid UTF-8, else
 * Latin-1, read as browsers read it (its Windows-1252 superset). Bytes that decode to NULs or
 * many control characters are binary, not text: `unsupported_format`.
 */
export interface DecodedText {
  text: string;
  encoding: TextEncoding;
}

export function decodeText(bytes: Uint8Array): DecodedText {
  const decoded = decodeBytes(bytes);
  if (looksBinary(decoded.text)) throw unsupportedFormat("binary data");
  return decoded;
}

function decodeBytes(bytes: Uint8Array): DecodedText {
  if (bytes[0] === 0xff && bytes[1] === 0xfe)
    return { text: decode("utf-16le", bytes), encoding: "utf-16le" };
  if (bytes[0] === 0xfe && bytes[1] === 0xff)
    return { text: decode("utf-16be", bytes), encoding: "utf-16be" };
  try {
    // `fatal` makes invalid UTF-8 an error instead of U+FFFD; the BOM is dropped by default.
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes), encoding: "utf-8" };
  } catch {
    return { text: new TextDecoder("windows-1252").decode(bytes), encoding: "latin-1" };
  }
}

const decode = (label: "utf-16le" | "utf-16be", bytes: Uint8Array) => new TextDecoder(label).decode(bytes);

/** Control characters text does not hold: C0 but tab, newlines, form feed; DEL; C1. */
const CONTROL = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/g;
/** Past this share of controls in the first 64 KiB, it is data, not text. */
const MAX_CONTROL_SHARE = 0.01;

function looksBinary(text: string): boolean {
  if (text.includes("\u0000")) return true;
  const head = text.slice(0, 64 * 1024);
  const controls = head.match(CONTROL)?.length ?? 0;
  return controls > head.length * MAX_CONTROL_SHARE;
}
