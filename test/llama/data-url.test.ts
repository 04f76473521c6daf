import { describe, expect, test } from "bun:test";
import { DataUrl, jsonBody, LLAMA_MAX_BODY_BYTES, type PiecewiseBody } from "../../src/llama/data-url.ts";
import { LlmError } from "../../src/llama/errors.ts";

// A request's images stay bytes until written (docs/performance.md, "Images"): the pieces
// jsonBody writes are, joined, exactly the JSON of the same request with the data: URLs spelled out.

/** The pieces joined, checked against the length announced first. */
function joined(body: string | PiecewiseBody): string {
  if (typeof body === "string") throw new Error("expected pieces");
  // Each piece copied as it comes: the next may overwrite it, as the socket writer allows.
  const all = Buffer.concat(Array.from(body.pieces(), (p) => Buffer.from(p)));
  expect(all.byteLength).toBe(body.byteLength);
  return all.toString("utf8");
}

const url = (mime: string, bytes: Uint8Array) =>
  `data:${mime};base64,${Buffer.from(bytes).toString("base64")}`;

describe("jsonBody", () => {
  test("no image: the JSON text itself", () => {
    expect(jsonBody({ a: [1, "x"] })).toBe('{"a":[1,"x"]}');
  });

  test("images of every length (padding, several pieces) written as base64 in place, the rest as JSON", () => {
    for (const length of [0, 1, 2, 3, 1000, 3 * 256 * 1024 + 1, 2_000_001]) {
      const bytes = new Uint8Array(length).map((_, i) => (i * 31 + length) & 0xff);
      const second = new Uint8Array([1, 2, 3, 4]);
      const value = {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: 'say "\u0000 hi" \\ ünïcode' },
              { type: "image_url", image_url: { url: new DataUrl("image/png", bytes) } },
              { type: "image_url", image_url: { url: new DataUrl("image/gif", second) } },
            ],
          },
        ],
      };
      const text = joined(jsonBody(value));
      const plain = JSON.stringify(value, (_k, v) => (v instanceof DataUrl ? url(v.mime, v.bytes) : v));
      expect(text).toBe(plain);
      expect(JSON.parse(text).messages[0].content[1].image_url.url).toBe(url("image/png", bytes));
    }
  });

  test("a text that looks like the placeholder is left as it is", () => {
    const value = { text: "\u0000not-the-nonce:0", image: new DataUrl("image/png", new Uint8Array([9])) };
    expect(JSON.parse(joined(jsonBody(value)))).toEqual({
      text: "\u0000not-the-nonce:0",
      image: "data:image/png;base64,CQ==",
    });
  });

  test("one image twice, beside a lone surrogate (made well-formed) and a tool schema's odd key", () => {
    const image = new DataUrl("image/png", new Uint8Array([7, 8]));
    const value = { a: image, b: ["x\ud800", image], tools: { "k\udc00": 1 } };
    expect(JSON.parse(joined(jsonBody(value)))).toEqual({
      a: "data:image/png;base64,Bwg=",
      b: ["x\ufffd", "data:image/png;base64,Bwg="],
      tools: { "k\ufffd": 1 },
    });
  });

  test("an image written by anything but jsonBody is its data: URL, not its bytes as an object", () => {
    expect(JSON.stringify({ u: new DataUrl("image/gif", new Uint8Array([1])) })).toBe(
      '{"u":"data:image/gif;base64,AQ=="}',
    );
  });

  test("a body over what llama-server reads is refused before a byte is sent, as its 413 would be", () => {
    const value = { image: new DataUrl("image/png", new Uint8Array(3000)) };
    const exact = (jsonBody(value) as PiecewiseBody).byteLength;
    expect((jsonBody(value, exact) as PiecewiseBody).byteLength).toBe(exact);
    let thrown: unknown;
    try {
      jsonBody(value, exact - 1);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(LlmError);
    expect(thrown).toMatchObject({ status: 413, data: { status: 413, problem: "too_large" } });
    expect(LLAMA_MAX_BODY_BYTES).toBe(100 * 1024 * 1024);
  });
});
