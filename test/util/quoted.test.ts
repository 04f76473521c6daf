import { expect, spyOn, test } from "bun:test";
import { jsonShape } from "../../src/util/json-shape.ts";
import { quotedEnd } from "../../src/util/quoted.ts";

/** The reading quotedEnd keeps: a backslash escapes the character after it. */
function reference(text: string, start: number, quote = 0x22): number {
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i++;
    else if (c === quote) return i;
  }
  return text.length;
}

test("a quoted text ends where a backslash-by-character reading ends it", () => {
  const parts = ['"', "\\", "a", "`", "\\\\", '\\"', "😀", "\n"];
  // Every text of up to four parts after the opening quote.
  let texts = ['"'];
  for (let round = 0; round < 4; round++) {
    texts = texts.flatMap((t) => parts.map((p) => t + p));
    for (const text of texts)
      for (const quote of [0x22, 0x60]) expect(quotedEnd(text, 0, quote)).toBe(reference(text, 0, quote));
  }
});

// A host's line over 64 KiB is counted before its parse (protocol/crowded-line.ts): read a
// character at a time, an 8 MiB image's base64 took 21-40 ms on the main loop beside its parse's
// 20 ms, so a ping behind every image chat waited twice as long. A string's end is looked for
// with indexOf now, each character no longer read in JavaScript.
test("a long string is passed over without reading it character by character", () => {
  const line = JSON.stringify({ id: 1, method: "chat", params: { images: [{ data: "A".repeat(200_000) }] } });
  const read = spyOn(String.prototype, "charCodeAt");
  try {
    expect(jsonShape(line).values).toBe(7);
    expect(read.mock.calls.length).toBeLessThan(1000);
  } finally {
    read.mockRestore();
  }
});
