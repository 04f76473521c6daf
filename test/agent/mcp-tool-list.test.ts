import { expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import {
  MAX_DESCRIPTION_CHARS,
  MAX_SCHEMA_CHARS,
  MAX_TOOLS_PER_SERVER,
  TOOL_NAME,
  vetTools,
} from "../../src/agent/mcp/tool-list.ts";
import { resolveTools } from "../../src/agent/tool-registry.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { MAX_NAME_RUN_BYTES } from "../../src/protocol/schema-names.ts";
import { LOOK_FROM_CHARS } from "../../src/util/json-shape.ts";
import { Interleaving } from "../fixtures/interleave.ts";
import { hostileServer, manyToolsServer, pidsIn } from "../fixtures/mcp-hostile.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

const never = new AbortController().signal;

test("tools the SDK's schema would refuse cost their own places, not their server's other tools", async () => {
  using scratch = tmpdir();
  const pool = new McpPool([hostileServer("loose-list", join(scratch.path, "pids"), 30)]);
  try {
    // Read through the SDK's ListToolsResultSchema, any one of them failed the whole start.
    const { tools, dropped } = await pool.listing("h", never);
    expect(tools.map((t) => [t.name, t.description])).toEqual([
      ["echo", "e"],
      ["nodesc", ""],
    ]);
    expect(dropped).toContain("3 of the 5 tools it listed were left out");
    expect(dropped).toContain('1 with an input schema that is not an object\'s ("stringy")');
    expect((await pool.call("h", "echo", { x: 1 }, never)).text).toBe('echo {"x":1}');
  } finally {
    await pool.close();
  }
}, 60_000);

// The description goes to llama-server in every request's tools: half an emoji at the cut is a
// lone surrogate, which its JSON parser refuses, failing every chat that offers the tool.
test("a long tool description is cut between characters", async () => {
  const description = `${"d".repeat(MAX_DESCRIPTION_CHARS - 1)}😀 and more`;
  const { tools } = await vetTools([{ name: "wordy", description }]);
  expect(tools[0]?.description.length).toBeLessThanOrEqual(MAX_DESCRIPTION_CHARS);
  expect(tools[0]?.description.isWellFormed()).toBe(true);
});

test("a turn's servers are started together: one whose start hangs does not hold back the next", async () => {
  using scratch = tmpdir();
  const hung = { ...hostileServer("init-hang", join(scratch.path, "a-pids"), 30), name: "a" };
  const bPids = join(scratch.path, "b-pids");
  const ok = { ...hostileServer("echo", bPids, 30), name: "b", startup_timeout_s: 60 };
  const pool = new McpPool([{ ...hung, startup_timeout_s: 60 }, ok]);
  const chat = new AbortController();
  try {
    const resolving = resolveTools(["a.*", "b.*"], pool, chat.signal).catch((e: unknown) => e);
    // One after another, b was not spawned until a's start gave up (startup_timeout_s, 60 s).
    expect(await waitFor(() => pidsIn(bPids).length === 1)).toBe(true);
    chat.abort();
    await resolving;
  } finally {
    await pool.close();
  }
}, 60_000);

test("a turn cancelled before its tools are listed starts none of its servers: no failure goes unheard", async () => {
  // A start that fails at once (no such command): begun for a cancelled turn, its failure was a
  // promise rejected with no handler (the core logs it as an unexpected fault).
  const pool = new McpPool([McpServerSchema.parse({ name: "m", command: "/nonexistent/mcp-server" })]);
  const chat = new AbortController();
  chat.abort(new Error("the chat was cancelled"));
  try {
    await expect(resolveTools(["m.*"], pool, chat.signal)).rejects.toThrow("the chat was cancelled");
    await expect(pool.listing("m", chat.signal)).rejects.toThrow("the chat was cancelled");
  } finally {
    await pool.close();
  }
});

// JSON.stringify escapes C0 controls only: a left-out name's bidi override, C1 control, DEL or
// line separator reached the host's `tools_unavailable` text raw, reordering what it shows.
test("a left-out tool name is quoted with its bidi overrides, C1 controls and line separators escaped", async () => {
  const raw = "\u202e\u2066\u0085\u009b\u007f\u2028\u2029";
  const { dropped } = await vetTools([{ name: `evil${raw}exe` }, { name: "ok" }]);
  expect(dropped).toContain("1 of the 2 tools it listed were left out");
  for (const c of raw) expect(dropped).not.toContain(c);
  expect(dropped).toContain('"evil\\u{202e}\\u{2066}\\u{85}\\u{9b}\\u{7f}\\u{2028}\\u{2029}exe"');
});

test("a tool whose input schema holds a $ref cycle that never reaches a value is left out, named; its server's others stay", async () => {
  // llama-server's converter follows an allOf component's chain of $refs without end (SIGSEGV),
  // at every request offering the tool; spelt with an index as strtoull reads it, too.
  const looped = { type: "object", allOf: [{ $ref: "#/allOf/0" }] };
  const spelt = {
    type: "object",
    $defs: { "a~1b": { $ref: "#/$defs/a~1b" } },
    allOf: [{ $ref: "#/$defs/a~1b" }],
  };
  // Recursion through properties or items reaches a value: kept.
  const linked = { type: "object", properties: { next: { anyOf: [{ $ref: "#" }, { type: "null" }] } } };
  const { tools, dropped, unfit } = await vetTools([
    { name: "looped", inputSchema: looped },
    { name: "spelt", inputSchema: spelt },
    {
      name: "tree",
      inputSchema: { type: "object", properties: { kids: { type: "array", items: { $ref: "#" } } } },
    },
    { name: "linked", inputSchema: linked },
    { name: "ok" },
  ]);
  expect(tools.map((t) => t.name)).toEqual(["tree", "linked", "ok"]);
  expect(unfit).toEqual(["looped", "spelt"]);
  expect(dropped).toContain("2 with an input schema whose $ref cycle never reaches a value");
  expect(dropped).toContain('"looped", "spelt"');
});

test("a tool whose $ref cycle or long name is only data (enum, default) is kept; one a $ref reads as a schema is not", async () => {
  // llama-server's converter dumps enum and const values and skips default and examples: it follows
  // no $ref and makes no rule name there, unless a schema's $ref names that value.
  const dots = ".".repeat(MAX_NAME_RUN_BYTES + 1);
  const data = {
    type: "object",
    properties: { a: { enum: [{ $ref: "#/properties/a/enum/0" }, { properties: { [dots]: {} } }] } },
    default: { allOf: [{ $ref: "#/default" }] },
  };
  const cycled = { type: "object", allOf: [{ $ref: "#/default" }], default: { $ref: "#/default" } };
  const named = {
    type: "object",
    properties: { q: { $ref: "#/default" } },
    default: { properties: { [dots]: {} } },
  };
  const { tools, unfit } = await vetTools([
    { name: "data", inputSchema: data },
    { name: "cycled", inputSchema: cycled },
    { name: "named", inputSchema: named },
  ]);
  expect(tools.map((t) => t.name)).toEqual(["data"]);
  expect(unfit).toEqual(["cycled", "named"]);
});

test("a tool whose property name or $ref holds a long run of bytes outside A-Z, a-z, 0-9 and - is left out; long plain names stay", async () => {
  // llama-server's converter names grammar rules through std::regex [^a-zA-Z0-9-]+, which recurses
  // once per byte of such a run: 2,000 bytes of `é` crashed it on macOS's 512 KiB thread stack.
  const accented = { type: "object", properties: { ["é".repeat(1000)]: { type: "string" } } };
  const dotted = {
    type: "object",
    $defs: { [".".repeat(300)]: { type: "string" } },
    properties: { q: { $ref: `#/$defs/${".".repeat(300)}` } },
  };
  const plain = {
    type: "object",
    properties: { ["a".repeat(5000)]: { type: "string" }, ["é".repeat(128)]: { type: "string" } },
  };
  const { tools, dropped, unfit } = await vetTools([
    { name: "accented", inputSchema: accented },
    { name: "dotted", inputSchema: dotted },
    { name: "plain", inputSchema: plain },
  ]);
  expect(tools.map((t) => t.name)).toEqual(["plain"]);
  expect(unfit).toEqual(["accented", "dotted"]);
  expect(dropped).toContain(`2 with a property name or $ref of over ${MAX_NAME_RUN_BYTES} bytes in a row`);
});

// A tool's schema was walked for its $ref cycles, then again for its long names: twice the
// milliseconds a tool, on the loop.
test("a tool's input schema is walked once for its cycles and names", async () => {
  const inputSchema = {
    type: "object",
    properties: { a: { $ref: "#/$defs/b" } },
    $defs: { b: { type: "string" } },
  };
  const entries = spyOn(Object, "entries");
  try {
    const { tools } = await vetTools([{ name: "once", inputSchema }]);
    expect(tools.map((t) => t.name)).toEqual(["once"]);
    expect(entries.mock.calls.filter(([v]) => v === inputSchema)).toHaveLength(1);
  } finally {
    entries.mockRestore();
  }
});

// A server listing MAX_TOOLS_PER_SERVER tools of schemas near MAX_SCHEMA_CHARS held the loop
// (ping and cancel) for the whole vetting, hundreds of milliseconds.
test("the loop turns between tools whose schemas are vetted: a ping waits for one tool, not the list", async () => {
  const schemas = Array.from({ length: MAX_TOOLS_PER_SERVER }, () => ({ type: "object", properties: {} }));
  const roots = new Set<unknown>(schemas);
  const loop = new Interleaving();
  const original = Object.entries;
  const entries = spyOn(Object, "entries").mockImplementation((v: object) => {
    if (roots.delete(v)) loop.slice();
    return original(v);
  });
  try {
    const { tools } = await vetTools(schemas.map((inputSchema, i) => ({ name: `t${i}`, inputSchema })));
    expect(tools).toHaveLength(MAX_TOOLS_PER_SERVER);
    expect(loop.slices).toHaveLength(MAX_TOOLS_PER_SERVER);
    expect(loop.unanswered).toBe(0);
  } finally {
    entries.mockRestore();
  }
});

test("a page of many tools left out by name alone turns the loop every MAX_TOOLS_PER_SERVER of them", async () => {
  let read = 0;
  let readAtPing = -1;
  const nameTest = spyOn(TOOL_NAME, "test").mockImplementation(() => {
    read++;
    return false;
  });
  try {
    setImmediate(() => {
      readAtPing = read;
    });
    const { dropped } = await vetTools(
      Array.from({ length: 10 * MAX_TOOLS_PER_SERVER }, (_, i) => ({ name: `t${i}` })),
    );
    expect(dropped).toContain(`${10 * MAX_TOOLS_PER_SERVER} of the ${10 * MAX_TOOLS_PER_SERVER} tools`);
    expect(readAtPing).toBeGreaterThanOrEqual(0);
    expect(readAtPing).toBeLessThanOrEqual(MAX_TOOLS_PER_SERVER);
  } finally {
    nameTest.mockRestore();
  }
});

// A tool's input schema over MAX_SCHEMA_CHARS was told by JSON.stringify of all of it (and a walk
// of all of it for its depth first), on the loop: one of a 16 MiB tools/list line held ping and
// cancel 30-60 ms for its text, 150-230 ms for 100,000 properties, to be left out. Its size is
// now told by a walk that stops once past the bound: neither is stringified.
test("a tool's schema far over MAX_SCHEMA_CHARS is left out without stringifying it", async () => {
  const long = { type: "object", description: "d".repeat(4 * MAX_SCHEMA_CHARS) };
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 20_000; i++) properties[`p${i}`] = { type: "string" };
  const wide = { type: "object", properties };
  const original = JSON.stringify;
  const stringified: unknown[] = [];
  const stringify = spyOn(JSON, "stringify").mockImplementation(((value: unknown, ...rest: []) => {
    stringified.push(value);
    return original(value, ...rest);
  }) as typeof JSON.stringify);
  try {
    const { tools, dropped } = await vetTools([
      { name: "long", inputSchema: long },
      { name: "wide", inputSchema: wide },
    ]);
    expect(tools).toEqual([]);
    expect(dropped).toContain(`2 with an input schema over ${MAX_SCHEMA_CHARS} characters`);
    expect(stringified.filter((v) => v === long || v === wide).length).toBe(0);
  } finally {
    stringify.mockRestore();
  }
});

// A server's line over LOOK_FROM_CHARS (up to MAX_LINE_BYTES, 16 MiB) was decoded, looked at
// (util/json-shape.ts) and parsed in one turn of the loop: on a 16 MiB tools/list page each step
// took 20-120 ms on a 2-core machine, and ping and cancel waited for all three together. The loop
// now turns between them. The line here is the hostile server's page of 22,000 tools (about 1.1 MB).
test("a tools/list line over LOOK_FROM_CHARS is decoded and parsed in turns of their own: a ping waits for one", async () => {
  const server = McpServerSchema.parse({ ...manyToolsServer("h", 22_000), timeout_s: 30 });
  const pool = new McpPool([server]);
  const loop = new Interleaving();
  const long = (n: number) => n > LOOK_FROM_CHARS;
  const decode = Buffer.prototype.toString;
  const toText = spyOn(Buffer.prototype, "toString").mockImplementation(function (
    this: Buffer,
    ...args: unknown[]
  ) {
    if (long(this.length)) loop.slice();
    return decode.apply(this, args as []);
  });
  const parse = JSON.parse;
  const fromText = spyOn(JSON, "parse").mockImplementation(((text: string, ...rest: []) => {
    if (typeof text === "string" && long(text.length)) loop.slice();
    return parse(text, ...rest);
  }) as typeof JSON.parse);
  try {
    const { tools } = await pool.listing("h", never);
    expect(tools).toHaveLength(MAX_TOOLS_PER_SERVER);
    expect(loop.slices).toHaveLength(2);
    expect(loop.unanswered).toBe(0);
  } finally {
    toText.mockRestore();
    fromText.mockRestore();
    await pool.close();
  }
}, 30_000);
