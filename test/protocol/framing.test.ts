import { describe, expect, test } from "bun:test";
import { type Frame, LineSplitter } from "../../src/protocol/framing.ts";

const enc = new TextEncoder();
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
});
