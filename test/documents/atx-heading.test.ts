import { expect, test } from "bun:test";
import { atxHeading, markdownBlocks } from "../../src/documents/blocks.ts";

// ATX headings read in one pass (documents/blocks.ts): the regex before it backtracked
// quadratically on a `#` line of spaces, 4.6 s of the main loop for one 64 Ki-character line.

test("ATX headings as CommonMark reads them", () => {
  expect(atxHeading("# Title")).toEqual({ level: 1, title: "Title" });
  expect(atxHeading("   ### Deep ###   ")).toEqual({ level: 3, title: "Deep" });
  expect(atxHeading("##\tTabbed")).toEqual({ level: 2, title: "Tabbed" });
  expect(atxHeading("# ends in#")).toEqual({ level: 1, title: "ends in#" });
  expect(atxHeading("###### six")).toEqual({ level: 6, title: "six" });
  expect(atxHeading("#")).toEqual({ level: 1, title: "" });
  expect(atxHeading("### ###")).toEqual({ level: 3, title: "" });
  for (const not of ["####### seven", "#hashtag", "    # indented four", "text # not", ""])
    expect(atxHeading(not)).toBeNull();
});

test("a heading line of spaces reads at once; past the line limit its rest is a paragraph", () => {
  const hostile = `# a${" ".repeat(64 * 1024)}b`;
  expect(atxHeading(hostile)).toEqual({ level: 1, title: `a${" ".repeat(64 * 1024)}b` });
  const blocks = [...markdownBlocks(`${hostile}\n\n# next\n`)];
  // Lines are handed on in parts of MAX_PARAGRAPH_CHARS: the heading's first, its last `b` after.
  expect(blocks.map((b) => [b.kind, b.text])).toEqual([
    ["heading", "a"],
    ["paragraph", "b"],
    ["heading", "next"],
  ]);
});
