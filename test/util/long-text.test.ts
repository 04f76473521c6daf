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

test("a piece that JSON would escape is written escaped: the line stays JSON and reads back as the text", () => {
  // Only base64 was ever handed in, but nothing said so: a quote, a backslash, a line break or a
  // lone surrogate (a pair cut between two pieces) went into the line raw, a broken answer line.
  const text = new LongText(['say "hi"\\', "\n", "\ud83d", "\ude00", "AB=="]);
  const line = jsonLine({ id: 1, data: text });
  const joined = typeof line === "string" ? line : line.join("");
  expect(joined.endsWith("\n")).toBe(true);
  expect(joined.slice(0, -1)).not.toContain("\n");
  expect(JSON.parse(joined)).toEqual({ id: 1, data: 'say "hi"\\\n\ud83d\ude00AB==' });
  // Its text elsewhere is the text given, not its escapes.
  expect(String(text)).toBe('say "hi"\\\n\ud83d\ude00AB==');
  expect(JSON.parse(JSON.stringify({ d: text }))).toEqual({ d: 'say "hi"\\\n\ud83d\ude00AB==' });
});

test("pieces added one at a time (a piece a turn of the loop) are the same as given at once", () => {
  const text = new LongText();
  for (const piece of ["QU", '"', "JD"]) text.add(piece);
  expect(JSON.parse((jsonLine({ d: text }) as string[]).join(""))).toEqual({ d: 'QU"JD' });
});
