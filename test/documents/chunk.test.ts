import { describe, expect, test } from "bun:test";
import { markdownBlocks, textBlocks } from "../../src/documents/blocks.ts";
import { Chunker } from "../../src/documents/chunk.ts";
import { CHUNK_TARGET_CHARS, HEADING_CHARS } from "../../src/documents/limits.ts";
import { splitLong } from "../../src/documents/split-long.ts";

const chunk = (md: string, target = 100) => {
  const c = new Chunker(target);
  for (const b of markdownBlocks(md)) c.push(b);
  return c.finish();
};

describe("chunking on structure", () => {
  test("headings start chunks and each chunk carries its heading path", () => {
    const chunks = chunk("intro\n\n# A\npara a\n\n## A.1\npara a1\n\n# B\npara b");
    expect(chunks.map((c) => [c.index, c.text, c.heading_path])).toEqual([
      [0, "intro", []],
      [1, "para a", ["A"]],
      [2, "para a1", ["A", "A.1"]],
      [3, "para b", ["B"]],
    ]);
  });

  test("a heading past HEADING_CHARS: carried cut, its whole text kept once as text (six 60k headings no longer multiply the store)", () => {
    const long = (n: number) => Array.from({ length: 10_000 }, (_, i) => `w${n}x${i}`).join(" ");
    const md = [1, 2, 3, 4, 5, 6].map((l) => `${"#".repeat(l)} ${long(l)}`).join("\n\n");
    const body = Array.from({ length: 50 }, (_, i) => `paragraph ${i} ${"words ".repeat(150)}`).join("\n\n");
    const chunks = chunk(`${md}\n\n${body}`, CHUNK_TARGET_CHARS);
    for (const c of chunks) {
      for (const h of c.heading_path) expect(h.length).toBeLessThanOrEqual(HEADING_CHARS + 1);
    }
    const last = chunks.at(-1)!;
    expect(last.heading_path).toHaveLength(6);
    expect(last.heading_path[5]!.endsWith("…")).toBe(true);
    expect(last.heading_path[5]!.startsWith("w6x0 w6x1")).toBe(true);
    // Each heading's words are all in the chunks' text, once.
    const text = chunks.map((c) => c.text).join(" ");
    for (const l of [1, 6]) expect(text.split(`w${l}x9999`).length - 1).toBe(1);
    const stored = chunks.reduce((n, c) => n + c.text.length + c.heading_path.join(" › ").length, 0);
    expect(stored).toBeLessThan(2 * (md.length + body.length));
  });

  test("a heading with nothing under it is a chunk of its own; an outline is read, not refused as no text", () => {
    // Before, a section with no body was in no chunk (its words never found), and a document of
    // headings alone made no chunk at all: "no_text".
    expect(chunk("# Plan\n## Deadline: March 3\n## Owner: Ana").map((c) => [c.text, c.heading_path])).toEqual(
      [
        ["Deadline: March 3", ["Plan"]],
        ["Owner: Ana", ["Plan"]],
      ],
    );
    expect(chunk("# A\ntext a\n# Empty\n# B\ntext b\n## Last").map((c) => [c.text, c.heading_path])).toEqual([
      ["text a", ["A"]],
      ["Empty", []],
      ["text b", ["B"]],
      ["Last", ["B"]],
    ]);
  });

  test("setext headings, and a # inside a code fence is code", () => {
    const chunks = chunk("Title\n=====\n\n```\n# not a heading\n```\n\nSub\n---\ntext");
    expect(chunks.map((c) => [c.text, c.heading_path])).toEqual([
      ["```\n# not a heading\n```", ["Title"]],
      ["text", ["Title", "Sub"]],
    ]);
  });

  test("paragraphs group up to the target, never past it", () => {
    const para = "x".repeat(40);
    const chunks = chunk([para, para, para, para].join("\n\n"));
    expect(chunks.map((c) => c.text.length)).toEqual([82, 82]);
    expect(chunks.every((c) => c.text.length <= 100)).toBe(true);
  });

  test("a long paragraph splits at sentences, then words, then anywhere", () => {
    const sentences = Array.from({ length: 20 }, (_, i) => `Sentence number ${i} ends here.`).join(" ");
    const pieces = splitLong(sentences, 100);
    expect(pieces.every((p) => p.length <= 100 && p.endsWith("."))).toBe(true);
    expect(pieces.join(" ")).toBe(sentences);
    const words = Array.from({ length: 60 }, () => "word").join(" ");
    expect(splitLong(words, 50).every((p) => p.length <= 50 && !p.includes("wor "))).toBe(true);
    expect(splitLong("y".repeat(250), 100).map((p) => p.length)).toEqual([100, 100, 50]);
    // a surrogate pair is never cut in two
    const emoji = "😀".repeat(60);
    expect(splitLong(emoji, 51).join("")).toBe(emoji);
    expect(splitLong(emoji, 51).every((p) => !/[\ud800-\udbff]$/.test(p))).toBe(true);
  });

  test("a page change starts a chunk, and the chunk keeps its page", () => {
    const c = new Chunker(1000);
    c.push({ kind: "paragraph", text: "one", page: 1 });
    c.push({ kind: "paragraph", text: "one more", page: 1 });
    c.push({ kind: "paragraph", text: "two", page: 2 });
    expect(c.finish()).toEqual([
      { index: 0, text: "one\n\none more", heading_path: [], page: 1 },
      { index: 1, text: "two", heading_path: [], page: 2 },
    ]);
  });

  test("plain text: paragraphs at blank lines, any line ending, no headings", () => {
    expect([...textBlocks("# a\r\nb\r\n\r\nc\rd\n\n\n")]).toEqual([
      { kind: "paragraph", text: "# a\nb" },
      { kind: "paragraph", text: "c\nd" },
    ]);
  });
});
