import { expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import Ajv from "ajv";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { hostileServer } from "../fixtures/mcp-hostile.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A tool's output schema comes from the server, and the core never offers it to the model: it
// must cost nothing on the main loop and fail nothing (docs/agent.md, MCP servers).

const never = new AbortController().signal;

test("a structured result against a backtracking output-schema pattern does not hold the main loop", async () => {
  using scratch = tmpdir();
  // Every JSON Schema validator the SDK (or the core) makes is Ajv's, compiled here.
  const compiled = spyOn(Ajv.prototype, "compile");
  const pool = new McpPool([hostileServer("output-schema", join(scratch.path, "pids"), 30)]);
  try {
    expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
    const out = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
    expect(out).toEqual({ isError: false, text: "ok" });
    // Validated on the main loop, the pattern takes seconds (hours for a few more a's): no
    // validator was made from the schema, so none ran it (by what ran, not by the loop's lag).
    const fromPattern = compiled.mock.calls.filter(([schema]) => JSON.stringify(schema).includes("(a+)+"));
    expect(fromPattern).toEqual([]);
  } finally {
    compiled.mockRestore();
    await pool.close();
  }
}, 60_000);

test("a tool whose output schema cannot be compiled does not fail its server's other tools", async () => {
  using scratch = tmpdir();
  const pool = new McpPool([hostileServer("bad-output-schema", join(scratch.path, "pids"), 30)]);
  try {
    expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo", "bad"]);
    expect((await pool.call("h", "echo", { x: 1 }, never)).text).toBe('echo {"x":1}');
  } finally {
    await pool.close();
  }
}, 60_000);
