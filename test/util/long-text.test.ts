import { expect, test } from "bun:test";
import { jsonLine, LongText } from "../../src/util/long-text.ts";

// A 20 MB image's sessions.attachment answer (27 Mi characters of base64) was joined into one
// string, stringified and written whole: ~100-200 ms of the main loop on a 2-core machine, a
// ping or a cancel unread meanwhile. Its pieces now go into the line as they are.

test("a LongText's pieces go into the line as they are, around the message's own JSON", () => {
  const pieces = ["QUJD".repeat(3), "REVG".repeat(2)];
  const msg = {
    id: 7,
    type: "result",
    result: { id: 1, mime: "image/png", data: new LongText(pieces), bytes: 15 },
  };
  const line = jsonLine(msg);
  expect(Array.isArray(line)).toBe(true);
  const parts = line as string[];
  // The very strings: nothing made a copy of them, nor one string of them all.
  expect(parts.filter((p) => pieces.includes(p))).toEqual(pieces);
  expect(parts.join("")).toBe(
    `${JSON.stringify({ ...msg, result: { ...msg.result, data: pieces.join("") } })}\n`,
  );
});

test("two LongTexts, and text that looks like the marker, keep their places", () => {
  const msg = { a: new LongText(["AA", "BB"]), b: "\u0000 not a marker", c: [new LongText(["CC"])] };
  const line = jsonLine(msg) as string[];
  expect(JSON.parse(line.join(""))).toEqual({ a: "AABB", b: "\u0000 not a marker", c: ["CC"] });
});

test("a message without one is one string; a LongText stringified elsewhere is its text", () => {
  expect(jsonLine({ a: 1 })).toBe('{"a":1}\n');
  expect(JSON.stringify({ d: new LongText(["x", "y"]) })).toBe('{"d":"xy"}');
});

test("a LongText put into text (a log line, a template) is its text, not [object Object]", () => {
  // sessions.attachment hands one on typed as the string it stands for (methods/sessions.ts).
  const data = new LongText(["QUJD", "REVG"]);
  expect(`${data}`).toBe("QUJDREVG");
  expect(String(data)).toBe("QUJDREVG");
});
