import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { checkedParams, loneSurrogatePath } from "../../src/protocol/params-check.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { writeStack } from "../fixtures/stack.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Text in params must be text: a lone UTF-16 surrogate is refused naming its field, before
// anything is stored or sent (llama-server would refuse the whole body: transcripts/20d).

describe("loneSurrogatePath", () => {
  test("finds the first string or key that is not well-formed, by its path", () => {
    expect(loneSurrogatePath({ input: "hello \ud800 there" })).toEqual(["input"]);
    expect(loneSurrogatePath({ input: ["fine", "\udbff"] })).toEqual(["input", 1]);
    expect(loneSurrogatePath({ a: { "k\udc00": 1 } })).toEqual(["a", "k\udc00"]);
    expect(loneSurrogatePath({ a: ["x", { b: "y" }], c: "z\ud800" })).toEqual(["c"]);
  });

  test("pairs, other text, numbers and nulls pass", () => {
    expect(loneSurrogatePath({ s: "smile \ud83d\ude00", n: 1, z: null, l: [true, "\\ud800"] })).toBeNull();
  });

  test("nesting as deep as a line allows does not overflow the stack", () => {
    let deep: unknown = "\ud800";
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(loneSurrogatePath(deep)?.length).toBe(200_000);
  });
});

describe("checkedParams", () => {
  test("a union's refusal names its branches' types, or the one branch the value failed inside", () => {
    const schema = z.object({
      input: z.union([z.string(), z.array(z.string())]),
      id: z.union([z.string(), z.number()]).optional(),
      mode: z.union([z.boolean(), z.literal("x")], { error: "true, false or x" }).optional(),
    });
    const refused = (params: object) => coreErrorOf(() => checkedParams(schema, params));
    // zod's own words were "params.input: Invalid input" for each of these.
    expect(refused({ input: 5 })).toMatchObject({
      message: "params.input: expected string or array, received number",
      data: { field: "input" },
    });
    expect(refused({}).message).toBe("params.input: required (string or array)");
    expect(refused({ input: ["a", 1] })).toMatchObject({
      message: "params.input.1: Invalid input: expected string, received number",
      data: { field: "input.1" },
    });
    expect(refused({ input: "a", id: true }).message).toBe(
      "params.id: expected string or number, received boolean",
    );
    // A union's own message stays.
    expect(refused({ input: "a", mode: 3 }).message).toBe("params.mode: true, false or x");
  });

  test("a field left out is 'required', not zod's 'received undefined'", () => {
    const schema = z.object({ model: z.string(), n: z.number().optional() });
    const err = coreErrorOf(() => checkedParams(schema, {}));
    expect(err).toMatchObject({ code: "invalid_request", data: { field: "model" } });
    expect(err.message).toBe("params.model: required (string)");
    expect(coreErrorOf(() => checkedParams(schema, { model: 1 })).message).toContain(
      "expected string, received number",
    );
  });
});

describe("through the stdio loop", () => {
  test("a chat, an embed and a rename with a lone surrogate: invalid_request naming the field; nothing stored", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const h = startHarness({ configPath: join(dir.path, "config.yaml"), cwd: dir.path });
    const chat = await h.request({
      id: 1,
      method: "chat",
      params: { session_id: "s1", input: "hello \ud800 there" },
    });
    expect(chat).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "input", reason: "not_well_formed" },
    });
    expect(chat.message).toContain("params.input");
    const emb = await h.request({ id: 2, method: "embed", params: { input: ["fine", "\udbff"] } });
    expect(emb).toMatchObject({ code: "invalid_request", data: { field: "input.1" } });
    const title = await h.request({
      id: 3,
      method: "sessions.rename",
      params: { session_id: "s1", title: "\udc00" },
    });
    expect(title).toMatchObject({ code: "invalid_request", data: { field: "title" } });
    const list = await h.request({ id: 4, method: "sessions.list", params: {} });
    expect(list.result.sessions).toEqual([]);
    expect(existsSync(join(stack.dataDir, "llama-server.pid"))).toBe(false);
    h.end();
    await h.exit;
  });
});

test("a key a strict object does not know is named at its own path, not the object holding it", () => {
  const schema = z.object({ images: z.array(z.object({ data: z.string() }).strict()) }).strict();
  const nested = coreErrorOf(() => checkedParams(schema, { images: [{ data: "x", dta: "y" }] }));
  expect(nested).toMatchObject({ code: "invalid_request", data: { field: "images.0.dta" } });
  expect(nested.message).toBe("params.images.0.dta: unknown key");
  const top = coreErrorOf(() => checkedParams(schema, { images: [], userId: "bob" }));
  expect(top).toMatchObject({ data: { field: "userId" }, message: "params.userId: unknown key" });
  // The empty key (`{"": …}`, a host's form field with no name) was `data.field: null` and
  // `params.: unknown key`: a host reading data.field found no field at all. It is shown as `""`.
  const empty = coreErrorOf(() => checkedParams(schema, { images: [], "": 1 }));
  expect(empty).toMatchObject({ data: { field: '""' }, message: 'params."": unknown key' });
});

test("a lone surrogate in a key is named escaped and cut: the answer about it is text itself", () => {
  // A JSON Schema's property names are the host's (response_format): the refusal quoted them raw,
  // so the error said to be about a lone surrogate carried one (a host parsing with serde_json
  // into a String cannot read that line at all, and its request never got an answer it could
  // read), and a key's newline or megabyte went into the message as it was.
  const schema = z.object({ schema: z.record(z.string(), z.unknown()) }).strict();
  const long = "k".repeat(5000);
  const refused = coreErrorOf(() =>
    checkedParams(schema, { schema: { properties: { [`${long}\n\ud800`]: { type: "string" } } } }),
  );
  expect(refused.code).toBe("invalid_request");
  expect(refused.message.isWellFormed()).toBe(true);
  expect(refused.message).not.toContain("\n");
  expect(refused.message.length).toBeLessThan(300);
  const field = (refused.data as { field: string }).field;
  expect(field.isWellFormed()).toBe(true);
  expect(field).toStartWith("schema.properties.kkk");
  expect(field.length).toBeLessThan(150);
  // A key with a newline above the bad string: escaped as JSON escapes it, one line of text.
  const below = coreErrorOf(() => checkedParams(schema, { schema: { "a\nb": { description: "\udc00" } } }));
  expect(below.data).toMatchObject({ field: "schema.a\\nb.description", reason: "not_well_formed" });
  expect(below.message).toStartWith("params.schema.a\\nb.description: has a lone UTF-16 surrogate");
  // Plain paths read as before.
  const plain = coreErrorOf(() => checkedParams(schema, { schema: { x: ["ok", "\ud800"] } }));
  expect(plain.data).toMatchObject({ field: "schema.x.1" });
});
