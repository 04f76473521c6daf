import { BASE64_SLICE_CHARS } from "./limits.ts";

/**
 * Standard base64 (RFC 4648 §4, with its padding), decoded strictly: Node's decoder skips what
 * it does not know and stops at the first `=`, so "not base64" would come out as a few bytes of
 * something; here any other character, white space included, or a length that is not a whole
 * number of quads is refused. The check and the decoding run in slices, the loop given back
 * between them, so a large payload never holds up a ping.
 */
const BASE64_QUADS = /^[A-Za-z0-9+/]*$/;

/** The bytes, or the problem in words. */
export async function decodeBase64Strict(
  text: string,
): Promise<{ ok: true; bytes: Buffer } | { ok: false; problem: string }> {
  if (text.length === 0) return { ok: false, problem: "empty" };
  if (text.length % 4 !== 0)
    return { ok: false, problem: `its length (${text.length}) is not a multiple of 4` };
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const body = text.length - padding;
  for (let at = 0; at < body; at += BASE64_SLICE_CHARS) {
    if (at > 0) await new Promise((r) => setImmediate(r));
    const slice = text.slice(at, Math.min(body, at + BASE64_SLICE_CHARS));
    if (!BASE64_QUADS.test(slice)) {
      const bad = at + slice.search(/[^A-Za-z0-9+/]/);
      return { ok: false, problem: `character ${bad} (${JSON.stringify(text[bad])}) is not base64` };
    }
  }
  // Decoded a slice (a whole number of quads) a turn too: 20 MB in one call held the loop ~40 ms.
  const bytes = Buffer.allocUnsafe((text.length / 4) * 3 - padding);
  let filled = 0;
  for (let at = 0; at < text.length; at += BASE64_SLICE_CHARS) {
    if (at > 0) await new Promise((r) => setImmediate(r));
    filled += bytes.write(text.slice(at, at + BASE64_SLICE_CHARS), filled, "base64");
  }
  return { ok: true, bytes: bytes.subarray(0, filled) };
}
