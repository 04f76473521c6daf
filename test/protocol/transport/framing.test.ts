import { heapStats } from "bun:jsc";
import { describe, expect, test } from "bun:test";
import { type Frame, LineSplitter } from "../../../src/protocol/transport/framing.ts";

const enc = new TextEncoder();
const withHead = (frames: Frame[]) =>
  frames.map((f) => (f.kind === "line" ? f.text : `<oversize ${f.bytes}> ${f.head}`));
const texts = (frames: Frame[]) => frames.map((f) => (f.kind === "line" ? f.text : `<oversize ${f.bytes}>`));

describe("LineSplitter", () => {
  test("splits LF and CRLF lines and skips blank ones", () => {
    const s = new LineSplitter(1024);
    expect(texts(s.push(enc.encode('{"a":1}\n\r\n\n{"b":2}\r\n   \n{"c"')))).toEqual(['{"a":1}', '{"b":2}']);
    expect(texts(s.push(enc.encode(":3}\n")))).toEqual(['{"c":3}']);
  });

  test("decodes a multi-byte character split across reads", () => {
    const s = new LineSplitter(1024);
    const bytes = enc.encode('{"t":"héllo 😀"}\n');
    const cut = bytes.indexOf(0xf0) + 2; // inside the 4-byte emoji
    expect(s.push(bytes.subarray(0, 3))).toEqual([]);
    expect(s.push(bytes.subarray(3, cut))).toEqual([]);
    expect(texts(s.push(bytes.subarray(cut)))).toEqual(['{"t":"héllo 😀"}']);
  });

  test("a line longer than the limit becomes one oversize frame and the next line survives", () => {
    const s = new LineSplitter(16);
    const frames = [
      ...s.push(enc.encode("x".repeat(10))),
      ...s.push(enc.encode("y".repeat(100))),
      ...s.push(enc.encode('z\n{"ok":1}\n')),
    ];
    expect(texts(frames)).toEqual(["<oversize 111>", '{"ok":1}']);
  });

  test("the limit counts UTF-8 bytes, also for lines whole inside one chunk", () => {
    const s = new LineSplitter(20); // {"a":"€€€"} is 17 bytes, ten € are 30
    const frames = s.push(enc.encode(`${"€".repeat(10)}\n${"y".repeat(40)}\n{"a":"€€€"}\n  \r\n`));
    expect(texts(frames)).toEqual(["<oversize 30>", "<oversize 40>", '{"a":"€€€"}']);
  });

  test("a final line without newline is delivered at end()", () => {
    const s = new LineSplitter(64);
    expect(s.push(enc.encode('{"a":1}'))).toEqual([]);
    expect(texts(s.end())).toEqual(['{"a":1}']);
    expect(s.end()).toEqual([]);
  });

  test("does not keep a reference to the caller's buffer", () => {
    const s = new LineSplitter(64);
    const buf = enc.encode("abc");
    s.push(buf);
    buf.fill(0x41);
    expect(texts(s.push(enc.encode("\n")))).toEqual(["abc"]);
  });

  test("a line trickled a byte per read is held in one buffer, not an array per byte", () => {
    // A copy per chunk cost about 240 bytes per byte in Node: a core trickling a 32 MiB line
    // (the client's maxLineBytes) would hold some 8 GB of its host's memory.
    const s = new LineSplitter(1 << 20);
    const arrays = () => {
      Bun.gc(true);
      return heapStats().objectTypeCounts.Uint8Array ?? 0;
    };
    const before = arrays();
    const x = enc.encode("x");
    for (let i = 0; i < 50_000; i++) expect(s.push(x)).toEqual([]);
    expect(arrays() - before).toBeLessThan(100);
    expect(texts(s.push(enc.encode("\n")))).toEqual(["x".repeat(50_000)]);
    // The next line starts afresh, also across reads.
    expect(s.push(enc.encode('{"a"'))).toEqual([]);
    expect(texts(s.push(enc.encode(":1}\n")))).toEqual(['{"a":1}']);
  });
});

/** Frames of `bytes` fed in one push, then split in two at every position, then byte by byte. */
function everySplit(max: number, bytes: Uint8Array, show = texts): { how: string; frames: string[] }[] {
  const run = (how: string, chunks: Uint8Array[]) => {
    const s = new LineSplitter(max);
    const frames = chunks.flatMap((c) => s.push(c));
    return { how, frames: show([...frames, ...s.end()]) };
  };
  const out = [run("one push", [bytes])];
  for (let i = 1; i < bytes.length; i++)
    out.push(run(`split at ${i}`, [bytes.subarray(0, i), bytes.subarray(i)]));
  out.push(
    run(
      "byte by byte",
      [...bytes].map((b) => Uint8Array.of(b)),
    ),
  );
  return out;
}

function expectSameEverySplit(max: number, bytes: Uint8Array, expected: string[], show = texts): void {
  for (const { how, frames } of everySplit(max, bytes, show))
    expect({ how, frames }).toEqual({ how, frames: expected });
}

const concat = (...parts: (string | number[])[]) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === "string" ? [...enc.encode(p)] : p)));

describe("LineSplitter: the verdict depends on the line, not on how it was read (issue 10 item 15)", () => {
  test("a byte order mark at the start of any line is ignored, the first or a later one", () => {
    const bom = [0xef, 0xbb, 0xbf];
    expectSameEverySplit(64, concat(bom, '{"a":1}\n', bom, '{"b":2}\r\n', bom, "\n", '{"c":3}\n'), [
      '{"a":1}',
      '{"b":2}',
      '{"c":3}',
    ]);
    // Only one: a second mark is part of the line (and then not JSON).
    expectSameEverySplit(64, concat(bom, bom, "{}\n"), ["\uFEFF{}"]);
  });

  test("blank means JSON whitespace only: a line of no-break spaces is a line (answered invalid_json)", () => {
    expectSameEverySplit(64, concat('{"a":1}\n', " \t \r\n", "\u00a0\n", " \u00a0 \r\n", '{"b":2}\n'), [
      '{"a":1}',
      "\u00a0",
      " \u00a0 ",
      '{"b":2}',
    ]);
    expectSameEverySplit(64, concat("\u3000\n\u2028\n"), ["\u3000", "\u2028"]);
  });

  test("the limit counts the line without its ending: exactly max_line_bytes plus CRLF is accepted", () => {
    const line = `{"a":"${"x".repeat(8)}"}`; // 16 bytes
    expect(enc.encode(line).length).toBe(16);
    expectSameEverySplit(16, concat(line, "\r\n", line, "\n", line), [line, line, line]);
    expectSameEverySplit(16, concat(`${line} \r\n`, line, "\r\n"), ["<oversize 17>", line]);
    expectSameEverySplit(16, concat(`${line}\r\r\n`, line, "\r\n"), ["<oversize 17>", line]);
  });

  test("the limit counts the bytes received, also when they are not valid UTF-8", () => {
    const invalid = (n: number) => Array.from({ length: n }, () => 0xff);
    // Over the limit: one oversize frame with the raw count, however it was split.
    expectSameEverySplit(16, concat(invalid(17), "\n", "{}\n"), ["<oversize 17>", "{}"]);
    expectSameEverySplit(16, concat(invalid(40), "\r\n", "{}\n"), ["<oversize 40>", "{}"]);
    // Within it: a line (each bad byte decodes to U+FFFD), which the dispatcher answers invalid_json.
    expectSameEverySplit(16, concat(invalid(16), "\r\n", "{}\n"), ["\uFFFD".repeat(16), "{}"]);
    // A truncated multi-byte character at the end of the line is bad bytes too.
    expectSameEverySplit(16, concat('{"a":"', [0xe2, 0x82], '"}\n'), ['{"a":"\uFFFD"}']);
  });
});

test("an oversize frame keeps the line's first 256 bytes (its id), however the line was read", () => {
  const line = `{"id":"call-7","type":"result","result":{"content":"${"é".repeat(200)}"}}`;
  const head = new TextDecoder().decode(enc.encode(line).subarray(0, 256));
  expect(head.startsWith('{"id":"call-7","type":"result"')).toBe(true);
  expectSameEverySplit(
    300,
    concat(line, "\r\n", "{}\n"),
    [`<oversize ${enc.encode(line).length}> ${head}`, "{}"],
    withHead,
  );
});

// The head of a core's too-long stderr line reaches the host (client/core-process.ts): cut inside
// a character, it ended in U+FFFD, a character the line never had.
test("an oversize frame's head cut inside a character ends before it, not in U+FFFD", () => {
  const line = `{"id":"call-7","type":"result","result":{"content":"x${"é".repeat(200)}"}}`;
  // Its 256th byte is the first of an é.
  const head = new TextDecoder().decode(enc.encode(line).subarray(0, 255));
  expect(head.endsWith("é")).toBe(true);
  expectSameEverySplit(
    300,
    concat(line, "\r\n", "{}\n"),
    [`<oversize ${enc.encode(line).length}> ${head}`, "{}"],
    withHead,
  );
  // A line of astral characters, cut inside one (4 bytes each, 256 = 64 of them: cut one byte in).
  const emoji = `x${"😀".repeat(100)}`;
  expectSameEverySplit(
    300,
    concat(emoji, "\n"),
    [`<oversize ${enc.encode(emoji).length}> x${"😀".repeat(63)}`],
    withHead,
  );
});
