import { expect, test } from "bun:test";
import { jsonShape } from "../../src/util/json-shape.ts";

// A server's long line is counted before it is parsed (util/json-shape.ts).

test("values and the top-level id, strings and nested ids aside", () => {
  expect(
    jsonShape(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a, [b] {c}"}]}}`),
  ).toEqual({
    values: 8,
    shallow: 4,
    id: 7,
  });
  expect(jsonShape(`{"result":{"id":1,"x":"\\"id\\":2"},"id":"k-1"}`).id).toBe("k-1");
  expect(jsonShape(`{"method":"id","params":[1,2,3]}`)).toEqual({ values: 6, shallow: 4, method: true });
  const many = JSON.stringify({
    jsonrpc: "2.0",
    id: 3,
    result: { content: Array.from({ length: 1000 }, () => ({})) },
  });
  expect(jsonShape(many).values).toBeGreaterThan(2000);
});

test("a top-level method says a request or a notification; a key named so deeper, or a value, does not", () => {
  expect(jsonShape(`{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{}}`)).toMatchObject({
    id: 0,
    method: true,
  });
  expect(jsonShape(`{"id":0,"result":{"method":"x"},"note":"method"}`).method).toBeUndefined();
});
