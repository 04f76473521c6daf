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

test("a changed list the server does not answer holds a listing only briefly: the tools read before are offered, the new ones once it answers", async () => {
  using scratch = tmpdir();
  const seen = join(scratch.path, "seen");
  const base = hostileServer("list-changed-hang", join(scratch.path, "pids"), 60);
  // Each listing's wait for the re-read ends when the test says, as RELIST_WAIT_MS would.
  let wait = new AbortController();
  const pool = new McpPool([{ ...base, env: { ...base.env, MCP_HOSTILE_SEEN: seen } }], Date.now, undefined, {
    relistClock: () => wait.signal,
  });
  try {
    expect(await names(pool)).toEqual(["echo"]);
    await pool.call("h", "echo", {}, never);
    // The re-read is asked and never answered: the listing goes on with the old list when its
    // short wait is up, not after timeout_s (60 s), saying so.
    const listing = pool.listing("h", never);
    wait.abort();
    const stale = await listing;
    expect(stale.tools.map((t) => t.name)).toEqual(["echo"]);
    expect(stale.dropped).toContain("not read");
    // The same re-read still pending: a later listing (the next turn) is not held again, it has
    // the old list at once, before the re-read is answered (a new wait would end only with the
    // answer or RELIST_WAIT_MS; this clock never ends it).
    wait = new AbortController();
    const again = pool.listing("h", never);
    const released = pool.call("h", "release", {}, never);
    const second = await again;
    expect(second.tools.map((t) => t.name)).toEqual(["echo"]);
    expect(second.dropped).toContain("not read");
    // The read goes on meanwhile; once answered, the next listing has the new tools. (Each call
    // says the list changed again, and that re-read is held too: its wait is ended at once here.)
    await released;
    await pool.call("h", "echo", {}, never); // a round trip: the re-read's answer is in
    // Its tools are vetted a loop turn a tool (tool-list.ts vetTools): those turns let it end.
    for (let turn = 0; turn < 4; turn++) await new Promise((r) => setImmediate(r));
    wait.abort();
    const next = await pool.listing("h", never);
    expect(next.tools.map((t) => t.name)).toEqual(["echo", "added"]);
    expect(next.dropped).toContain("not read");
  } finally {
    await pool.close();
  }
}, 30_000);
