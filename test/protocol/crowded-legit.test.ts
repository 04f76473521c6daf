import { expect, test } from "bun:test";
import { crowdedLine, MAX_HOST_VALUES } from "../../src/protocol/crowded-line.ts";
import { MAX_SCHEMA_CHARS, schemaProblem } from "../../src/protocol/schema-problem.ts";

// A `response_format` schema up to 256 KiB is taken (docs/protocol.md, Structured output), and one
// that is an enum of 25,000 product codes is within it: a line count of 20,000 values refused it,
// `invalid_request` with a message about "JSON values" that no limit the host was told names.
test("a chat whose schema is as big as the schema's limit allows is not refused as crowded", () => {
  const codes = Array.from({ length: 25_000 }, (_, i) => `c${i}`);
  const schema = { type: "string", enum: codes };
  expect(schemaProblem(schema)).toBeUndefined();
  const params = { input: "pick one", response_format: { type: "json_schema", schema } };
  expect(crowdedLine(JSON.stringify({ id: 1, method: "chat", params }))).toBeUndefined();
  // The most values a schema of MAX_SCHEMA_CHARS can hold: one digit and a comma each.
  const digits = { type: "integer", enum: Array.from({ length: (MAX_SCHEMA_CHARS - 40) / 2 }, () => 0) };
  expect(JSON.stringify(digits).length).toBeLessThanOrEqual(MAX_SCHEMA_CHARS);
  expect(schemaProblem(digits)).toBeUndefined();
  const images = Array.from({ length: 64 }, () => ({ data: "AAAA", mime: "image/png" }));
  const most = { input: "x", images, response_format: { type: "json_schema", schema: digits } };
  expect(crowdedLine(JSON.stringify({ id: 2, method: "chat", params: most }))).toBeUndefined();
  // An embed of its 2,048 inputs too.
  const input = Array.from({ length: 2048 }, (_, i) => `text ${i} `.repeat(8));
  expect(crowdedLine(JSON.stringify({ id: 3, method: "embed", params: { input } }))).toBeUndefined();
  // And a line past every request's worth is still refused.
  const keys = Array.from({ length: MAX_HOST_VALUES + 10 }, (_, i) => `"k${i}":0`).join(",");
  expect(crowdedLine(`{"id":4,"method":"ping","params":{${keys}}}`)?.id).toBe(4);
});

// A crowded line's refusal names the id JSON.parse would read, as the host wrote it, or null: one
// of `1e2` echoed as 100 failed, at the host, its request 100 still running (docs/protocol.md,
// ids: `1.0`, `1e2`, `-0` are echoed as written), and of two `id` keys the last is the one read.
test("a crowded line's refusal echoes its id as written, or null", () => {
  const crowd = Array.from({ length: MAX_HOST_VALUES + 10 }, () => "0").join(",");
  const line = (id: string, more = "") => `{"id":${id},"method":"ping"${more},"params":{"x":[${crowd}]}}`;
  expect(crowdedLine(line("100"))?.id).toBe(100);
  expect(crowdedLine(line('"a\\"b"'))?.id).toBe('a"b');
  for (const respelled of ["1e2", "100.0", "-0", "18446744073709551616", "1E+2"])
    expect(crowdedLine(line(respelled))?.id).toBeNull();
  expect(crowdedLine(line("1", ',"id":{"x":2}'))?.id).toBeNull();
  expect(crowdedLine(line("1", ',"id":"two"'))?.id).toBe("two");
  expect(crowdedLine(line(`"${"x".repeat(300)}"`))?.id).toBeNull();
});
