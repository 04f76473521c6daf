import { describe, expect, test } from "bun:test";
import { compileSchema } from "../../src/agent/json-validator.ts";

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
});
