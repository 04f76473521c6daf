import { expect, test } from "bun:test";
import { WRITE_SLICE_CHARS, Writer } from "../../../src/protocol/transport/writer.ts";
import { LongText } from "../../../src/util/long-text.ts";

/**
 * The writes as stdout sends them: each one encoded to UTF-8 alone (a lone surrogate half at a
 * write's end would become U+FFFD), the bytes read back as a strict host parser reads them.
 */
async function sent(msg: object): Promise<{ text: string; writes: number }> {
  const chunks: Uint8Array[] = [];
  const encoder = new TextEncoder();
  const w = new Writer({ write: (data) => void chunks.push(encoder.encode(data)) }, { queueSize: 100 });
  await w.terminal(msg as Parameters<Writer["terminal"]>[0]);
  expect(await w.drain(5000)).toBe(true);
  return {
    text: new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks)),
    writes: chunks.length,
  };
}

// Emoji (surrogate pairs), a quote, a backslash and a newline (escaped in the line: two
// characters each) and a 2-byte character: 15 characters of JSON, put across a slice's end at
// each of its positions.
const TRICKY = '\u{1F600}"\\\u{1F4A9}é\u{1F600}\n"';
const TRICKY_JSON = JSON.stringify(TRICKY).length - 2;

test("text with emoji, quotes and escapes across a slice's end, at every position, is sent whole and the same", async () => {
  const opening = JSON.stringify({ id: "a", type: "result", result: { data: "" } }).indexOf('""') + 1;
  for (let shift = 0; shift <= TRICKY_JSON; shift++) {
    const data = `${"a".repeat(WRITE_SLICE_CHARS - opening - shift)}${TRICKY}b`;
    const msg = { id: "a", type: "result", result: { data } };
    const { text, writes } = await sent(msg);
    expect(writes).toBe(2);
    expect(JSON.parse(text)).toEqual(msg);
  }
});

test("the text around a LongText's pieces keeps its emoji and escapes whole across a slice's end", async () => {
  const opening = JSON.stringify({ id: 7, type: "result", result: { before: "" } }).indexOf('""') + 1;
  for (let shift = 0; shift <= TRICKY_JSON; shift++) {
    const before = `${"x".repeat(WRITE_SLICE_CHARS - opening - shift)}${TRICKY}`;
    const pieces = ["QUJD", "REVG"];
    const msg = { id: 7, type: "result", result: { before, data: new LongText(pieces), after: TRICKY } };
    const { text } = await sent(msg);
    expect(JSON.parse(text)).toEqual({
      id: 7,
      type: "result",
      result: { before, data: "QUJDREVG", after: TRICKY },
    });
  }
});
