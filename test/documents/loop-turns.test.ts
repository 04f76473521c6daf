import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { eachLine, MAX_PARAGRAPH_CHARS, markdownBlocks } from "../../src/documents/blocks.ts";
import { decodeText } from "../../src/documents/decode.ts";
import { HtmlBlocks } from "../../src/documents/html-blocks.ts";
import { SLICE_CHARS } from "../../src/documents/limits.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import { Interleaving } from "../fixtures/interleave.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";

/**
 * Hostile documents against docs/agent.md "Off the main loop": the loop's turns are counted, or
 * each slice's size and a turn between every two (deterministic: no bound on milliseconds).
 */
const fromBytes = (bytes: Uint8Array, name = "doc") =>
  readDocument({ path: name }, { readFile: async () => bytes });
const utf8 = (s: string) => new TextEncoder().encode(s);

/** Turns of the loop taken while `work` runs, whether or not it fails. */
const loopDuring = (work: () => Promise<unknown>) =>
  turnsDuring(() =>
    Promise.resolve()
      .then(work)
      .catch(() => {}),
  );

describe("text and Markdown give the loop back on characters scanned, not on block text", () => {
  const n = 2 * 1024 * 1024;
  const hostile: [string, string, string][] = [
    ["blank lines", "\n".repeat(n), "a.txt"],
    ["a heading, then blank lines", `# h\n${"\n".repeat(n)}`, "a.md"],
    ["empty headings", `# t\n${"#\n".repeat(n / 2)}`, "a.md"],
    ["a fence of short lines", `# t\n\`\`\`\n${"a\n".repeat(n / 2)}`, "a.md"],
    ["one line with no white space", "a".repeat(n), "a.txt"],
  ];
  for (const [what, text, name] of hostile) {
    test(what, async () => {
      const { turns } = await loopDuring(() => fromBytes(utf8(text), name));
      // A turn at least every two slices' worth of characters (the old reader took one or none).
      expect(turns).toBeGreaterThan(text.length / SLICE_CHARS / 2);
    });
  }

  test("a line over the paragraph limit comes in pieces, cut at white space, nothing lost", () => {
    const words = "word ".repeat(40_000);
    const pieces = [...eachLine(words)];
    expect(pieces.length).toBeGreaterThan(2);
    expect(pieces.every((p) => p.length <= MAX_PARAGRAPH_CHARS && p.endsWith(" "))).toBe(true);
    expect(pieces.join("")).toBe(words);
    const emoji = `x${"😀".repeat(50_000)}\nnext`;
    const cut = [...eachLine(emoji)];
    expect(cut.every((p) => !/[\ud800-\udbff]$/.test(p))).toBe(true);
    expect(cut.join("")).toBe(emoji.replace("\n", ""));
    expect(cut.at(-1)).toBe("next");
  });
});

describe("Markdown's code fences", () => {
  test("fences opened and closed line after line are handed on within the paragraph limit", () => {
    // Each line opens or closes a fence: the flush at the limit was skipped on both, so 2 MB came
    // as one paragraph (16 MB held the loop for its join and its split into 13,000 chunks).
    for (const text of ["```\n".repeat(512 * 1024), "```\nx\n```\n".repeat(256 * 1024)]) {
      const blocks = [...markdownBlocks(text)];
      expect(blocks.length).toBeGreaterThan(text.length / MAX_PARAGRAPH_CHARS / 2);
      expect(blocks.every((b) => b.text.length <= 2 * MAX_PARAGRAPH_CHARS)).toBe(true);
    }
  });
});

describe("HTML with no block tags", () => {
  test("text gathered past the paragraph limit is handed on, never cut inside a reference", () => {
    const html = `<p>${"&amp;".repeat(200_000)}`;
    const scan = new HtmlBlocks(html);
    const first = scan.step(SLICE_CHARS * 2);
    expect(first.length).toBeGreaterThan(0);
    const blocks = [...first];
    while (!scan.done) blocks.push(...scan.step(SLICE_CHARS));
    expect(blocks.every((b) => b.text.length <= MAX_PARAGRAPH_CHARS)).toBe(true);
    expect(blocks.map((b) => b.text).join("")).toBe("&".repeat(200_000));
    const words = new HtmlBlocks(`<p>${"word ".repeat(100_000)}`);
    const paragraphs = words.step(html.length);
    expect(paragraphs.length).toBeGreaterThan(5);
    expect(paragraphs.every((b) => /^(word )*word$/.test(b.text))).toBe(true);
  });

  test("16 MB of references in one paragraph: each slice hands on two paragraphs at most, the loop turning between", async () => {
    const html = utf8(`<p>${"&amp;".repeat(3_200_000)}`);
    const loop = new Interleaving();
    const original = HtmlBlocks.prototype.step;
    const step = spyOn(HtmlBlocks.prototype, "step").mockImplementation(function (this: HtmlBlocks, chars) {
      const blocks = original.call(this, chars);
      loop.slice(
        Math.max(
          chars,
          blocks.reduce((n, b) => n + b.text.length, 0),
        ),
      );
      return blocks;
    });
    try {
      await fromBytes(html);
    } finally {
      step.mockRestore();
    }
    // The old reader gathered the whole paragraph and decoded it in one slice: the loop held over a second.
    expect(loop.slices.length).toBeGreaterThan(html.length / SLICE_CHARS);
    expect(Math.max(...loop.slices)).toBeLessThanOrEqual(2 * MAX_PARAGRAPH_CHARS);
    expect(loop.unanswered).toBe(0);
  });
});

describe("decoding looks before it decodes, and stops at the text limit", () => {
  const Original = globalThis.TextDecoder;
  let decoded = 0;
  afterEach(() => {
    globalThis.TextDecoder = Original;
  });
  /** TextDecoder counting the bytes it is given. */
  const counting = () => {
    decoded = 0;
    globalThis.TextDecoder = class extends Original {
      override decode(...args: Parameters<TextDecoder["decode"]>): string {
        decoded += args[0]?.byteLength ?? 0;
        return super.decode(...args);
      }
    } as typeof TextDecoder;
  };
  const mib64 = 64 * 1024 * 1024 - 16;
  const decode = (bytes: Uint8Array) => Promise.resolve().then(() => decodeText(bytes));

  test("64 MiB of binary is refused before a byte is decoded", async () => {
    counting();
    const noise = new Uint8Array(64 * 1024).map((_, i) => (i * 7919) % 251);
    const bytes = new Uint8Array(mib64);
    for (let at = 0; at < mib64; at += noise.length) bytes.set(noise.subarray(0, mib64 - at), at);
    await expect(decode(bytes)).rejects.toThrow(
      expect.objectContaining({ data: { reason: "unsupported_format" } }),
    );
    expect(decoded).toBe(0);
    await expect(decode(new Uint8Array(mib64).fill(1))).rejects.toThrow(/not a format/);
    expect(decoded).toBe(0);
  });

  test("64 MiB of ASCII with a bad last byte: too large, decoded once and only in part", async () => {
    const bytes = new Uint8Array(mib64).fill(0x61);
    bytes[bytes.length - 1] = 0xe9;
    counting();
    const { turns } = await loopDuring(async () => {
      await expect(decode(bytes)).rejects.toThrow(
        expect.objectContaining({ data: { problem: "too_large" } }),
      );
    });
    expect(decoded).toBeLessThan(20 * 1024 * 1024);
    expect(turns).toBeGreaterThan(8);
  });
});
