import { describe, expect, test } from "bun:test";
import { exactIds, numberSources } from "../../src/protocol/exact-id.ts";

// Number ids read as written (docs/protocol.md, ids), from the line's text in one pass: a hostile
// review found the reviver's parse recursing to a RangeError at ~5,000 levels, which ended the
// core's read loop over one line.

describe("numberSources", () => {
  test("the top-level id and params.request_id, as written; nothing else named id", () => {
    const line = `{"params":{"x":{"request_id":9.5,"id":2.5},"request_id":1e2},"id":1.0,"z":[{"id":3.0}]}`;
    expect(numberSources(line)).toEqual({ id: "1.0", requestId: "1e2" });
  });

  test("a key spelled with escapes, a string that looks like a key, and the last of a repeated key", () => {
    expect(numberSources(`{"\\u0069d":-0,"s":"\\"id\\":5.0"}`)).toEqual({ id: "-0" });
    expect(numberSources(`{"id":1.0,"id":"text"}`)).toEqual({ id: undefined });
    expect(numberSources(`{"params":{"request_id":7.0},"params":{}}`)).toEqual({ requestId: undefined });
  });

  test("nesting far past the stack's depth reads in one pass", () => {
    const deep = `${"[".repeat(200_000)}${"]".repeat(200_000)}`;
    const line = `{"params":{"a":${deep},"request_id":18446744073709551616},"id":1.5}`;
    expect(numberSources(line)).toEqual({ id: "1.5", requestId: "18446744073709551616" });
    const parsed = JSON.parse(line) as Record<string, unknown>;
    expect(JSON.stringify(exactIds(line, parsed))).toBe(`{"id":1.5,"requestId":18446744073709551616}`);
  });
});
