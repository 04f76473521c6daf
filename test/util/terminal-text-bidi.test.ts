import { expect, test } from "bun:test";
import { logLine } from "../../src/util/log-line.ts";
import { terminalJson, terminalText } from "../../src/util/terminal-text.ts";

// Unicode's own list of the characters that reorder what a reader sees (Bidi_Control: the
// marks, embeddings, overrides and isolates, U+061C ARABIC LETTER MARK among them): a GGUF's
// name or a hub file name holding one showed a reordered line in the views, the log and --json.
const BIDI = [...Array(0x3000).keys()]
  .map((c) => String.fromCharCode(c))
  .filter((c) => /\p{Bidi_Control}/u.test(c));

test("every bidi control is escaped in the views, the log and --json, and --json reads back the same", () => {
  expect(BIDI).toContain("\u061c");
  for (const c of BIDI) {
    const text = `name ${c}gpj.exe`;
    expect(terminalText(text)).not.toContain(c);
    expect(logLine(text)).not.toContain(c);
    const json = terminalJson({ text });
    expect(json).not.toContain(c);
    expect(JSON.parse(json)).toEqual({ text });
  }
});
