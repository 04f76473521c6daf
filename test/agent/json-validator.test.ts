import { describe, expect, test } from "bun:test";
import { ajvHeld, compileSchema } from "../../src/agent/json-validator.ts";

describe("compileSchema (the structured answer's validator)", () => {
  test("errors name the place in the answer and what is wrong; all of them, not the first", () => {
    const validate = compileSchema({
      type: "object",
      properties: { name: { type: "string", maxLength: 3 }, age: { type: "integer", minimum: 0 } },
      required: ["name", "age"],
    });
    expect(validate({ name: "Ada", age: 36 })).toEqual([]);
    expect(validate({ name: "Adelaide", age: -1 })).toEqual([
      { path: "/name", message: "must NOT have more than 3 characters" },
      { path: "/age", message: "must be >= 0" },
    ]);
    expect(validate([])).toEqual([{ path: "", message: "must be object" }]);
  });

  test("formats are checked (date-time, email)", () => {
    const validate = compileSchema({ type: "string", format: "date-time" });
    expect(validate("2026-12-01T20:31:33Z")).toEqual([]);
    expect(validate("yesterday")).toHaveLength(1);
  });

  test("two schemas with the same $id do not collide; the same schema again is the same validator", () => {
    const a = compileSchema({ $id: "https://example.com/p", type: "string" });
    const b = compileSchema({ $id: "https://example.com/p", type: "number" });
    expect(a("x")).toEqual([]);
    expect(b("x")).toHaveLength(1);
    expect(compileSchema({ $id: "https://example.com/p", type: "string" })(1)).toHaveLength(1);
  });

  test("a schema it cannot compile throws, saying why", () => {
    expect(() => compileSchema({ type: "object", properties: { a: { $ref: "#/nowhere" } } })).toThrow(
      /can't resolve reference #\/nowhere/,
    );
    expect(() => compileSchema({ type: "strnig" })).toThrow(/type must be JSONType/);
    expect(() => compileSchema({ type: "object", required: "name" })).toThrow(/required value must be/);
  });

  test("many different schemas: the old ones are let go, each still validates when asked again", () => {
    for (let i = 0; i < 100; i++) expect(compileSchema({ const: i })(i)).toEqual([]);
    expect(compileSchema({ const: 0 })(1)).toHaveLength(1);
  });

  test("a host naming ever new schemas, compiled or refused, leaves Ajv holding a bounded number of them", () => {
    for (let i = 0; i < 1000; i++) {
      compileSchema({ type: "object", properties: { [`k${i}`]: { type: "string", pattern: `^a${i}$` } } });
      expect(() => compileSchema({ properties: { a: { $ref: `#/nowhere${i}` } } })).toThrow(/can't resolve/);
    }
    // About six values per schema while the instance lives: a few hundred schemas' worth, not 2,000.
    expect(ajvHeld()).toBeLessThan(2000);
    expect(compileSchema({ type: "string", pattern: "^a5$" })("a5")).toEqual([]);
  });

  test("a schema refers to itself with $ref: # through items or properties (docs/protocol.md)", () => {
    const list = compileSchema({ type: "array", items: { $ref: "#" } });
    expect(list([[], [[]]])).toEqual([]);
    expect(list([[1]])).toEqual([{ path: "/0/0", message: "must be array" }]);
    const node = compileSchema({
      type: "object",
      properties: { kids: { type: "array", items: { $ref: "#" } } },
    });
    expect(node({ kids: [{ kids: [] }] })).toEqual([]);
    expect(node({ kids: [{ kids: 1 }] })).toHaveLength(1);
  });

  test("patterns run on a linear-time engine: ^(a+)+$ over 30 hostile strings answers, correctly", () => {
    const hostile = Array.from({ length: 30 }, () => `${"a".repeat(40)}!`);
    const items = compileSchema({ type: "array", items: { type: "string", pattern: "^(a+)+$" } });
    expect(items(hostile)).toHaveLength(30);
    expect(items(["aaa"])).toEqual([]);
    const keys = compileSchema({ type: "object", patternProperties: { "^(a+)+$": { type: "integer" } } });
    const answer = Object.fromEntries(hostile.map((k, i) => [`${k}${i}`, "x"]));
    expect(keys(answer)).toEqual([]);
    expect(keys({ aaaa: "x" })).toEqual([{ path: "/aaaa", message: "must be integer" }]);
    // RE2 has no lookaround: such a pattern is not taken (refused with the params first).
    expect(() => compileSchema({ type: "string", pattern: "^(?=a)" })).toThrow(/Perl syntax/);
  });

  test("the formats' regexes run on RE2 where it takes them; url stays right", () => {
    const email = compileSchema({ type: "string", format: "email" });
    expect(email("ada@example.com")).toEqual([]);
    expect(email(`${"1".repeat(20000)}!`)).toHaveLength(1);
    const url = compileSchema({ type: "string", format: "url" });
    expect(url("https://example.com/a")).toEqual([]);
    expect(url("not a url")).toHaveLength(1);
  });
});
