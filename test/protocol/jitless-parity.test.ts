import { describe, expect, test } from "bun:test";
import type { z } from "zod";
import { PropsSchema } from "../../src/llama/props.ts";
import { loadDefinitions, TEST_METHODS } from "../../src/methods/index.ts";

/**
 * checkedParams and parseProps parse with `jitless: true` (bench/first-parse.ts): zod's compiled
 * object path is skipped. Every method's params, and /props, must come out the same either way:
 * success, the data (keys with undefined values and key order included), and the first issue's
 * path, code and message that the core's `invalid_request` names.
 */

const VALUES: unknown[] = [
  undefined,
  null,
  0,
  1,
  -1,
  1.5,
  2 ** 40,
  Number.NaN,
  "",
  "x",
  "default_user",
  "auto",
  "../x",
  "\ud800",
  true,
  false,
  [],
  ["a"],
  [1],
  [{ role: "user", content: "hi" }],
  [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  [
    { role: "system", content: "s" },
    { role: "assistant", content: null, tool_calls: [] },
  ],
  [{ name: "t", description: "d", input_schema: { type: "object" } }],
  {},
  { type: "json_schema", schema: { type: "object" } },
  { type: "text" },
  { a: 1 },
  // Nested strict objects, unions and refinements (think, images, response_format, model refs).
  "high",
  "hf:org/name:Q4_K_M",
  { budget_tokens: 10 },
  { budget_tokens: -1 },
  { budget_tokens: 10, extra: 1 },
  [{ data: "aGk=", mime: "image/png" }],
  [{ path: "/x.png", extra: 1 }],
  [{ data: 1 }],
  { type: "json_schema", schema: { type: "object", properties: { a: { type: "string" } } }, strict: true },
  { type: "json_schema" },
];

type Outcome = { success: boolean; data?: string; issue?: unknown };

/** Data as text that tells `{a: undefined}` from `{}` and keeps key order. */
function shown(value: unknown): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_key, v) => {
    if (v === undefined) return "<undefined>";
    if (typeof v === "number" && !Number.isFinite(v)) return `<${v}>`;
    if (typeof v === "bigint") return `<${v}n>`;
    if (v && typeof v === "object") {
      if (seen.has(v)) return "<seen>";
      seen.add(v);
      if (!Array.isArray(v) && !(v.constructor === Object || v.constructor === undefined))
        return `<${v.constructor?.name}>`;
      if (!Array.isArray(v)) {
        // Own keys with undefined values are kept by JSON.stringify's replacer only as written here.
        return Object.fromEntries(Object.keys(v).map((k) => [k, v[k] === undefined ? "<undefined>" : v[k]]));
      }
    }
    return v;
  });
}

function outcome(schema: z.ZodType, input: unknown, jitless: boolean): Outcome {
  let parsed: ReturnType<z.ZodType["safeParse"]>;
  try {
    parsed = schema.safeParse(structuredClone(input), jitless ? { jitless: true } : undefined);
  } catch (err) {
    return { success: false, issue: `threw ${(err as Error).message}` };
  }
  if (parsed.success) return { success: true, data: shown(parsed.data) };
  const first = parsed.error.issues[0];
  return { success: false, issue: first && { path: first.path, code: first.code, message: first.message } };
}

/** The parts of zod's internal def read to find an object's shape. */
interface Def {
  shape?: object;
  in?: { _zod?: { def: Def } };
  innerType?: { _zod?: { def: Def } };
  schema?: { _zod?: { def: Def } };
}

/** The top-level keys of an object schema (through pipes, transforms and wrappers). */
function keysOf(schema: z.ZodType): string[] {
  let def: Def | undefined = (schema as unknown as { _zod: { def: Def } })._zod.def;
  for (let i = 0; i < 10 && def; i++) {
    if (def.shape) return Object.keys(def.shape);
    def = (def.in ?? def.innerType ?? def.schema)?._zod?.def;
  }
  return [];
}

/** A varied set: empty, an unknown key, and each known key set to each of VALUES, alone and together. */
function inputsFor(schema: z.ZodType): unknown[] {
  const keys = keysOf(schema);
  const inputs: unknown[] = [{}, { nope: 1 }, { [keys[0] ?? "k"]: "x", extra: true }];
  for (const key of keys) for (const value of VALUES) inputs.push({ [key]: value });
  for (const value of VALUES) inputs.push(Object.fromEntries(keys.map((k) => [k, value])));
  return inputs;
}

/** Each schema parsed compiled first in one pass (zod compiles on a first parse), then jitless. */
function mismatches(schema: z.ZodType, inputs: unknown[]): unknown[] {
  const found: unknown[] = [];
  for (const input of inputs) {
    const compiled = outcome(schema, input, false);
    const jitless = outcome(schema, input, true);
    if (shown(compiled) !== shown(jitless)) found.push({ input: shown(input), compiled, jitless });
  }
  return found;
}

describe("jitless parse gives what the compiled parse gives", async () => {
  const methods = [...(await loadDefinitions()), ...(await Promise.all(TEST_METHODS.map((m) => m.load())))];

  test("every method's schema is known by its keys", () => {
    // A method whose params are no object would be compared on {} alone: say so here.
    const keyless = methods.filter((m) => keysOf(m.params as z.ZodType).length === 0).map((m) => m.name);
    expect(keyless.length).toBeLessThan(methods.length);
  });

  for (const method of methods) {
    test(`${method.name}'s params`, () => {
      const schema = method.params as z.ZodType;
      expect(mismatches(schema, inputsFor(schema))).toEqual([]);
    });
  }

  test("/props", () => {
    const bodies: unknown[] = [
      {},
      { default_generation_settings: { n_ctx: 4096 }, total_slots: 1, chat_template: "{{x}}" },
      { default_generation_settings: { n_ctx: 1.5 }, total_slots: "2", is_sleeping: "no" },
      { default_generation_settings: null, modalities: { vision: true, audio: false } },
      { modalities: { vision: true }, chat_template_caps: { supports_tools: "yes" } },
      { chat_template_caps: { supports_tools: true, other: 1 }, bos_token: "<s>", eos_token: 3 },
      { build_info: "b1", model_path: "/m.gguf", extra: { nested: true } },
      null,
      [],
      "text",
    ];
    expect(mismatches(PropsSchema, [...bodies, ...inputsFor(PropsSchema)])).toEqual([]);
  });
});
