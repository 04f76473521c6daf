import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { hostileServer } from "../fixtures/mcp-hostile.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// notifications/tools/list_changed was ignored: a server's tools were read once a start.

const never = new AbortController().signal;

async function withListChanged(
  mode: string,
  use: (pool: McpPool, listings: () => number) => Promise<void>,
): Promise<void> {
  using scratch = tmpdir();
  const seen = join(scratch.path, "seen");
  const base = hostileServer(mode, join(scratch.path, "pids"), 30);
  const pool = new McpPool([{ ...base, env: { ...base.env, MCP_HOSTILE_SEEN: seen } }], Date.now);
  const listings = () =>
    existsSync(seen) ? readFileSync(seen, "utf8").split("\n").filter(Boolean).length : 0;
  try {
    await use(pool, listings);
  } finally {
    await pool.close();
  }
}

const names = async (pool: McpPool) => (await pool.tools("h", never)).map((t) => t.name);

test("a server that says its tool list changed has it read again at the next listing, once", async () => {
  await withListChanged("list-changed", async (pool, listings) => {
    expect(await names(pool)).toEqual(["echo"]);
    expect(await names(pool)).toEqual(["echo"]);
    expect(listings()).toBe(1);
    await pool.call("h", "echo", {}, never);
    // Two listings at once (two chats' turns) share one read.
    const [a, b] = await Promise.all([names(pool), names(pool)]);
    expect(a).toEqual(["echo", "added"]);
    expect(b).toEqual(["echo", "added"]);
    expect(listings()).toBe(2);
    // Not read again without a new notification.
    expect(await names(pool)).toEqual(["echo", "added"]);
    expect(listings()).toBe(2);
  });
}, 30_000);

test("a changed list that cannot be read keeps the tools read before", async () => {
  await withListChanged("list-changed-error", async (pool, listings) => {
    expect(await names(pool)).toEqual(["echo"]);
    await pool.call("h", "echo", {}, never);
    expect(await names(pool)).toEqual(["echo"]);
    expect(listings()).toBe(2);
    expect((await pool.call("h", "echo", {}, never)).text).toContain("echo");
  });
}, 30_000);

test("a list said changed while the start read it is read again at the first listing", async () => {
  // The notification came before the start's listing was answered: no handler heard it then.
  await withListChanged("list-changed-at-start", async (pool, listings) => {
    expect(await names(pool)).toEqual(["echo", "added"]);
    expect(listings()).toBe(2);
  });
}, 30_000);
