import { describe, expect, spyOn, test } from "bun:test";
import { vetTools } from "../../src/agent/mcp/tool-list.ts";
import { askValidator } from "../../src/agent/validator-thread.ts";
import {
  MAX_LOOP_PATTERN_CHARS,
  MAX_NAME_RUN_BYTES,
  MAX_SCHEMA_BRANCHES,
  MAX_SCHEMA_CHARS,
  MAX_SCHEMA_OBJECTS,
  MAX_SCHEMA_PATTERNS,
  patternsLeftToCompile,
  ResponseFormatSchema,
  schemaProblem,
} from "../../src/protocol/response-format.ts";

describe("response_format: what the params alone refuse", () => {
  test("ordinary schemas pass, recursive ones through properties or items too", () => {
    expect(schemaProblem({ type: "object", properties: { a: { type: "string" } } })).toBeUndefined();
    const tree = { $defs: { n: { type: "array", items: { $ref: "#/$defs/n" } } }, $ref: "#/$defs/n" };
    expect(schemaProblem(tree)).toBeUndefined();
    const linked = { type: "object", properties: { next: { anyOf: [{ $ref: "#" }, { type: "null" }] } } };
    expect(schemaProblem(linked)).toBeUndefined();
  });

  test("a $ref cycle that never reaches a value is named, with its pointers", () => {
    expect(schemaProblem({ $ref: "#" })).toContain("# → #");
    const two = { $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" };
    expect(schemaProblem(two)).toMatch(/\$ref cycle.*#\/\$defs\/a → #\/\$defs\/b → #\/\$defs\/a/);
    const viaAllOf = { $defs: { a: { allOf: [{ not: { $ref: "#/$defs/a" } }] } }, $ref: "#/$defs/a" };
    expect(schemaProblem(viaAllOf)).toContain("$ref cycle");
    const escaped = { $defs: { "a/b": { $ref: "#/$defs/a~1b" } }, $ref: "#/$defs/a~1b" };
    expect(schemaProblem(escaped)).toContain("#/$defs/a~1b");
  });

  test("a $ref cycle spelt as llama-server reads a pointer is found too: its converter follows it without end", () => {
    // llama-server (common/json-schema-to-grammar.cpp) takes each token as written, without ~1 or
    // % escapes, and an array's index as strtoull reads it; an allOf component's chain of $refs
    // it follows so crashed it (SIGSEGV), every chat in flight with it.
    const raw = { $defs: { "x~1y": { $ref: "#/$defs/x~1y" } }, allOf: [{ $ref: "#/$defs/x~1y" }] };
    expect(schemaProblem(raw)).toContain("$ref cycle");
    const percent = { $defs: { "x%41": { $ref: "#/$defs/x%41" } }, allOf: [{ $ref: "#/$defs/x%41" }] };
    expect(schemaProblem(percent)).toContain("$ref cycle");
    for (const index of ["0x", " 0", "+0", "-0", "00"])
      expect(schemaProblem({ allOf: [{ $ref: `#/allOf/${index}` }] })).toContain("$ref cycle");
    // Not an index to either reader: dangling, left to them.
    for (const index of ["x0", "-1", "1"])
      expect(schemaProblem({ allOf: [{ $ref: `#/allOf/${index}` }] })).toBeUndefined();
    // strtoull negates a minus sign's value modulo 2^64: -18446744073709551615 reads as 1. Past
    // 2^64 - 1 it is out of range, which llama-server refuses (std::stoull throws).
    const second = (index: string) => schemaProblem({ allOf: [{}, { $ref: `#/allOf/${index}` }] });
    for (const index of [
      "-18446744073709551615",
      ` -${"0".repeat(1000)}18446744073709551615x`,
      `${"0".repeat(1000)}1`,
    ])
      expect(second(index)).toContain("$ref cycle");
    for (const index of ["-18446744073709551614", "-18446744073709551616", "18446744073709551617"])
      expect(second(index)).toBeUndefined();
  });

  test("a $ref inside enum, const, default or examples is data: no cycle; a $ref into data makes it a schema", () => {
    // Neither llama-server's converter nor the validator follows a $ref written in a value;
    // both read what a schema's $ref names as a schema, wherever it is.
    const inEnum = { type: "object", properties: { a: { enum: [{ $ref: "#/properties/a/enum/0" }] } } };
    expect(schemaProblem(inEnum)).toBeUndefined();
    const inValues = {
      default: { $ref: "#/default" },
      examples: [{ allOf: [{ $ref: "#/examples/0" }] }],
      const: { properties: { [".".repeat(MAX_NAME_RUN_BYTES + 1)]: {} } },
    };
    expect(schemaProblem(inValues)).toBeUndefined();
    const reached = { allOf: [{ $ref: "#/default" }], default: { $ref: "#/default" } };
    expect(schemaProblem(reached)).toContain("#/default → #/default");
    const named = {
      type: "object",
      properties: { q: { $ref: "#/default" } },
      default: { properties: { [".".repeat(MAX_NAME_RUN_BYTES + 1)]: {} } },
    };
    expect(schemaProblem(named)).toContain("a property name at #/default/properties has");
    // Each object is walked a bounded number of times, however many $refs reach into nested data.
    let nested: Record<string, unknown> = Object.fromEntries(
      Array.from({ length: 1000 }, (_, i) => [`k${i}`, {}]),
    );
    for (let d = 0; d < 50; d++) nested = { enum: nested };
    const refs = Array.from({ length: 51 }, (_, d) => ({ $ref: `#/default${"/enum".repeat(d)}` }));
    const entries = spyOn(Object, "entries");
    try {
      expect(schemaProblem({ anyOf: refs, default: nested })).toBeUndefined();
      expect(entries.mock.calls.length).toBeLessThan(4 * (1000 + 50 + 51 + 2));
      // The walk stops at the bound on objects, data's included.
      entries.mockClear();
      const many = { default: Array.from({ length: 60_000 }, () => ({})) };
      expect(schemaProblem(many)).toContain(`more than ${MAX_SCHEMA_OBJECTS} objects`);
      expect(entries.mock.calls.length).toBeLessThan(MAX_SCHEMA_OBJECTS + 10);
    } finally {
      entries.mockRestore();
    }
  });

  test("a property name or $ref with a long run of bytes outside A-Z, a-z, 0-9 and - is refused: llama-server's converter crashes on it", () => {
    // Its rule names go through std::regex [^a-zA-Z0-9-]+, recursing once per byte of such a run:
    // ~25,000 bytes overflowed an 8 MiB stack, ~1,700 a 512 KiB one (macOS's threads).
    const long = "é".repeat(MAX_NAME_RUN_BYTES);
    expect(schemaProblem({ type: "object", properties: { [long]: { type: "string" } } })).toContain(
      `a property name at #/properties has ${2 * MAX_NAME_RUN_BYTES} bytes in a row outside`,
    );
    const ref = {
      $defs: { [".".repeat(30_000)]: { type: "string" } },
      $ref: `#/$defs/${".".repeat(30_000)}`,
    };
    expect(schemaProblem(ref)).toContain("the $ref at # has 30001 bytes in a row outside");
    // A long name of letters and digits is no run; a short run is taken.
    const fine = {
      type: "object",
      properties: { ["a".repeat(50_000)]: {}, ["é".repeat(128)]: {}, "a.b c": {} },
    };
    expect(schemaProblem(fine)).toBeUndefined();
  });

  test("an enum's numbers and strings are not walked one by one: a big one does not hold the loop", () => {
    // Each of them got an entry and a pointer string, for the params check and again for the turn's
    // answer format (and for an MCP tool's schema): 120,000 held the loop 50-100 ms each time.
    const values = Array.from({ length: 40_000 }, (_, i) => (i % 2 ? i : "v"));
    const schema = { type: "object", properties: { a: { enum: values }, b: { default: { n: 1, s: "s" } } } };
    const entries = spyOn(Object, "entries");
    try {
      expect(schemaProblem(schema)).toBeUndefined();
      expect(patternsLeftToCompile(schema)).toBe(false);
      const made = entries.mock.results.reduce((n, r) => n + (r.value as unknown[]).length, 0);
      expect(made).toBeLessThan(100);
    } finally {
      entries.mockRestore();
    }
  });

  test("runs are counted in one pass over each name, in UTF-8 bytes: a big schema's names do not hold the loop", () => {
    // A ~250 KB name like a.a.a… split into 125,000 runs, each measured by Buffer.byteLength, and
    // every $ref was measured twice: tens of milliseconds on the loop, ping and cancel waiting.
    const byteLength = spyOn(Buffer, "byteLength");
    const split = spyOn(String.prototype, "split");
    try {
      const dotted = "a.".repeat(120_000);
      expect(schemaProblem({ type: "object", properties: { [dotted]: {} } })).toBeUndefined();
      const defs = Object.fromEntries(Array.from({ length: 900 }, (_, i) => [`d${i}`, { type: "string" }]));
      const refs = Object.fromEntries(
        Array.from({ length: 900 }, (_, i) => [`p${i}`, { $ref: `#/$defs/d${i}` }]),
      );
      expect(schemaProblem({ $defs: defs, type: "object", properties: refs })).toBeUndefined();
      expect(byteLength).not.toHaveBeenCalled();
      // Splits are the pointers' tokens (twice per $ref), not the names' runs.
      expect(split.mock.calls.filter(([by]) => by instanceof RegExp)).toEqual([]);
    } finally {
      byteLength.mockRestore();
      split.mockRestore();
    }
    // Bytes as UTF-8 counts them: 2 for é, 3 for 中 and a lone surrogate, 4 for a pair.
    const run = (name: string) =>
      schemaProblem({ type: "object", properties: { [name]: {} } })?.match(/has (\d+) bytes/)?.[1];
    expect(run(`a${"é".repeat(150)}中😀\ud800.b`)).toBe(String(300 + 3 + 4 + 3 + 1));
    expect(run(`${"😀".repeat(64)}a${".".repeat(MAX_NAME_RUN_BYTES + 1)}`)).toBe(
      String(MAX_NAME_RUN_BYTES + 1),
    );
    expect(run("😀".repeat(64))).toBeUndefined();
    expect(run(`${"\udc00".repeat(86)}x`)).toBe("258");
  });

  test("too big and too deep are refused; depth is walked without recursion", () => {
    expect(schemaProblem({ description: "x".repeat(MAX_SCHEMA_CHARS) })).toContain("at most");
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 5000; i++) deep = { items: deep };
    expect(schemaProblem(deep)).toContain("deeper than 64");
    // Past the stack's depth JSON.stringify itself throws (a hostile review: internal_error).
    for (let i = 0; i < 200_000; i++) deep = { items: deep };
    expect(schemaProblem(deep)).toContain("deeper than 64");
  });

  test("dangling and remote $refs are left to the validator and llama-server", () => {
    expect(schemaProblem({ properties: { a: { $ref: "#/nowhere" } } })).toBeUndefined();
    expect(schemaProblem({ $ref: "https://example.com/s.json" })).toBeUndefined();
  });

  test("the two formats, and nothing else", () => {
    expect(ResponseFormatSchema.safeParse({ type: "json_object" }).success).toBe(true);
    expect(ResponseFormatSchema.safeParse({ type: "json_schema", schema: {}, name: "x" }).success).toBe(true);
    expect(ResponseFormatSchema.safeParse({ type: "json_schema", schema: {}, name: "" }).success).toBe(false);
    expect(ResponseFormatSchema.safeParse({ type: "text" }).success).toBe(false);
  });

  test("bounded before the validator sees it: objects, branches, patterns", () => {
    const branches = (n: number) => ({ anyOf: Array.from({ length: n }, (_, i) => ({ const: i })) });
    expect(schemaProblem(branches(MAX_SCHEMA_BRANCHES))).toBeUndefined();
    expect(schemaProblem(branches(MAX_SCHEMA_BRANCHES + 1))).toContain("#/anyOf has 129 branches");
    const props = (n: number) => ({
      type: "object",
      properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "string" }])),
    });
    expect(schemaProblem(props(MAX_SCHEMA_OBJECTS - 2))).toBeUndefined();
    expect(schemaProblem(props(MAX_SCHEMA_OBJECTS))).toContain(`more than ${MAX_SCHEMA_OBJECTS} objects`);
    const patterns = (n: number) => ({
      type: "object",
      patternProperties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`^p${i}$`, {}])),
    });
    expect(schemaProblem(patterns(MAX_SCHEMA_PATTERNS))).toBeUndefined();
    expect(schemaProblem(patterns(MAX_SCHEMA_PATTERNS + 1))).toContain(`at most ${MAX_SCHEMA_PATTERNS}`);
  });

  test("a pattern RE2 cannot match in linear time is refused, naming where; data is not a pattern", () => {
    expect(schemaProblem({ type: "string", pattern: "^(a+)+$" })).toBeUndefined();
    expect(schemaProblem({ properties: { a: { pattern: "(?=x)" } } })).toMatch(
      /pattern at #\/properties\/a\/pattern cannot be matched in linear time/,
    );
    expect(schemaProblem({ patternProperties: { "(a)\\1": {} } })).toContain("#/patternProperties/(a)\\1");
    expect(schemaProblem({ enum: [{ pattern: "(?=x)" }], const: { pattern: "(?=" } })).toBeUndefined();
  });

  test("OpenAPI's example is data as examples is: its regex or long key is no schema's", async () => {
    // A regex tool's schema says what it takes by an `example` value; neither the validator (an
    // unknown keyword: strict off) nor llama-server's converter reads it, and it was refused.
    const regexTool = {
      type: "object",
      properties: { pattern: { type: "string" } },
      example: { pattern: "(?<=\\s)foo", properties: { [".".repeat(MAX_NAME_RUN_BYTES + 1)]: "x" } },
    };
    expect(schemaProblem(regexTool)).toBeUndefined();
    expect(await askValidator(JSON.stringify(regexTool), undefined, 30_000)).toMatchObject({
      kind: "compiled",
    });
    // What a $ref names is a schema, there as anywhere.
    expect(schemaProblem({ ...regexTool, allOf: [{ $ref: "#/example" }] })).toContain(
      "a property name at #/example/properties has",
    );
  });

  test("an OpenAPI extension (x-...) is data too: its regex or long key is no schema's", async () => {
    // Swagger tooling's x-example and x-examples say what a field takes as example does; no
    // validator or converter reads an x- keyword, and a lookaround in one refused the tool.
    const tool = {
      type: "object",
      properties: { q: { type: "string" } },
      "x-example": { pattern: "(?<=\\s)foo" },
      "x-examples": [{ properties: { [".".repeat(MAX_NAME_RUN_BYTES + 1)]: "x" } }],
    };
    expect(schemaProblem(tool)).toBeUndefined();
    expect(await askValidator(JSON.stringify(tool), undefined, 30_000)).toMatchObject({ kind: "compiled" });
    // A property named so is a schema, and what a $ref names is one, there as anywhere.
    expect(schemaProblem({ properties: { "x-example": { pattern: "(?=x)" } } })).toContain(
      "pattern at #/properties/x-example/pattern cannot be matched",
    );
    expect(schemaProblem({ ...tool, allOf: [{ $ref: "#/x-example" }] })).toContain(
      "pattern at #/x-example/pattern cannot be matched",
    );
  });

  test("OpenAPI's discriminator, xml and x- extensions are data: a lookaround or long key there is no schema's", async () => {
    // Generated OpenAPI schemas carry these beside the schema's keywords; Ajv (strict off, its
    // discriminator option off) and llama-server's converter read none of them, and they were refused.
    const dots = ".".repeat(MAX_NAME_RUN_BYTES + 1);
    const generated = {
      type: "object",
      properties: { kind: { type: "string" } },
      discriminator: { propertyName: "kind", mapping: { a: "#/$defs/a" }, pattern: "(?<=a)b" },
      xml: { name: "thing", properties: { [dots]: {} } },
      "x-validation": { pattern: "(?!x)y", allOf: [{ $ref: "#/x-validation" }] },
    };
    expect(schemaProblem(generated)).toBeUndefined();
    expect(await askValidator(JSON.stringify(generated), undefined, 30_000)).toMatchObject({
      kind: "compiled",
    });
    const tool = await vetTools([{ name: "generated", inputSchema: generated }]);
    expect(tool.tools.map((t) => t.name)).toEqual(["generated"]);
    // What a $ref names is a schema, there as anywhere; a property named so is one too.
    expect(schemaProblem({ ...generated, allOf: [{ $ref: "#/x-validation" }] })).toContain(
      "cannot be matched",
    );
    expect(schemaProblem({ type: "object", properties: { "x-a": { pattern: "(?=a)" } } })).toContain(
      "cannot be matched",
    );
  });

  test("a property or definition named enum, const, default or examples is a schema, checked as any other", () => {
    // Those names are data only as a schema's keywords; under properties or $defs they name schemas,
    // which llama-server's converter and the validator read: a long run there crashed the converter.
    const dots = ".".repeat(MAX_NAME_RUN_BYTES + 1);
    for (const name of ["enum", "const", "default", "examples"]) {
      const named = {
        type: "object",
        properties: { [name]: { type: "object", properties: { [dots]: {} } } },
      };
      expect(schemaProblem(named)).toContain(`a property name at #/properties/${name}/properties has`);
      const defined = { $defs: { [name]: { pattern: "(?=x)" } }, $ref: `#/$defs/${name}` };
      expect(schemaProblem(defined)).toContain(`pattern at #/$defs/${name}/pattern cannot be matched`);
      const dependent = { dependencies: { [name]: { pattern: "(?=x)" } } };
      expect(schemaProblem(dependent)).toContain(
        `pattern at #/dependencies/${name}/pattern cannot be matched`,
      );
    }
    // A keyword's data still is data.
    expect(
      schemaProblem({ default: { properties: { [dots]: {} } }, enum: [{ pattern: "(?=x)" }] }),
    ).toBeUndefined();
  });

  test("the params check reads a pattern's syntax without expanding its counted repeats (the loop's time)", async () => {
    // 36 of these fill the 256 KiB a schema may be and took the core's loop 12 s to compile:
    // each expands to some million instructions. Their size is the validator's thread's to judge.
    const huge = "a{1000}".repeat(1500);
    expect(schemaProblem({ type: "string", pattern: huge })).toBeUndefined();
    const answer = await askValidator(JSON.stringify({ type: "string", pattern: huge }), undefined, 30_000);
    expect(answer).toMatchObject({ kind: "refused", message: expect.stringContaining("too large") });
    // What the syntax alone refuses still is, a counted repeat beside it or not.
    expect(schemaProblem({ pattern: "(?=x){3}a{2,5}" })).toContain("cannot be matched in linear time");
    expect(schemaProblem({ pattern: "(a)\\1{2}" })).toContain("cannot be matched in linear time");
    for (const ok of ["^\\d{5}$", "\\{2}", "[{2}]", "x{2,}", "^[a-z]{1,1000}$"])
      expect(schemaProblem({ pattern: ok })).toBeUndefined();
  });

  test("patterns too long together to read on the loop are left to the validator's compile", async () => {
    // The lookbehind ends a run of patterns: within the bound it is refused here, naming it.
    const schema = (filler: number) => ({
      properties: {
        a: { pattern: "x".repeat(filler) },
        b: { pattern: "(?<=a)b" },
      },
    });
    const within = schema(MAX_LOOP_PATTERN_CHARS - 7);
    expect(schemaProblem(within)).toContain("#/properties/b/pattern cannot be matched in linear time");
    expect(patternsLeftToCompile(within)).toBe(false);
    const past = schema(MAX_LOOP_PATTERN_CHARS - 6);
    expect(schemaProblem(past)).toBeUndefined();
    expect(patternsLeftToCompile(past)).toBe(true);
    const answer = await askValidator(JSON.stringify(past), undefined, 30_000);
    expect(answer).toMatchObject({ kind: "refused" });
    // Data is not a pattern, so it counts toward nothing.
    expect(patternsLeftToCompile({ const: { pattern: "x".repeat(5000) } })).toBe(false);
  });

  test("a long schema's pattern RE2 refuses is named by its place, as a short one is", async () => {
    const past = {
      properties: {
        a: { pattern: "x".repeat(MAX_LOOP_PATTERN_CHARS) },
        "b/c": { pattern: "(?<=a)b" },
      },
    };
    expect(schemaProblem(past)).toBeUndefined();
    const answer = await askValidator(JSON.stringify(past), undefined, 30_000);
    expect(answer).toMatchObject({ kind: "refused" });
    const message = (answer as { message: string }).message;
    expect(message).toContain("the pattern at #/properties/b~1c/pattern cannot be matched in linear time");
    expect(message).toContain("lookaround and backreferences are not taken");
    // Another refusal keeps the compiler's own words.
    const dangling = { properties: { a: past.properties.a }, $ref: "#/nowhere" };
    const other = await askValidator(JSON.stringify(dangling), undefined, 30_000);
    expect(other).toMatchObject({ kind: "refused" });
    expect((other as { message: string }).message).not.toContain("the pattern at");
  });
});
