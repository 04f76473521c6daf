import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { hostileServer, pidsIn } from "../fixtures/mcp-hostile.ts";
import { alive } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// A call that outlasts timeout_s gets its server killed: not before the other calls in flight on
// it (other chats') have settled, which it failed, each told only that the server was stopped.

const never = new AbortController().signal;

/**
 * A pool of the hostile server in held-calls mode (a call to `hang` never answered, others held
 * until a cancel comes) whose calls end as at timeout_s when the test aborts `clocks[tool]`.
 */
async function withHeld(
  use: (
    pool: McpPool,
    files: { pids: string; seen: () => string[] },
    clocks: Map<string, AbortController>,
  ) => Promise<void>,
): Promise<void> {
  using scratch = tmpdir();
  const pids = join(scratch.path, "pids");
  const seenFile = join(scratch.path, "seen");
  const base = hostileServer("held-calls", pids, 60);
  const cfg = { ...base, env: { ...base.env, MCP_HOSTILE_SEEN: seenFile } };
  const clocks = new Map<string, AbortController>();
  const callClock = (tool: string) => clocks.get(tool)?.signal;
  const pool = new McpPool([cfg], Date.now, undefined, { callClock });
  const seen = () => (existsSync(seenFile) ? readFileSync(seenFile, "utf8").split("\n").filter(Boolean) : []);
  try {
    await pool.tools("h", never);
    await use(pool, { pids, seen }, clocks);
  } finally {
    await pool.close();
  }
}

test("a call that outlasts timeout_s does not fail another call in flight to the same server; the server goes once it is answered", async () => {
  await withHeld(async (pool, { pids, seen }, clocks) => {
    clocks.set("hang", new AbortController());
    const hung = pool.call("h", "hang", {}, never).catch((e: unknown) => e);
    const other = pool.call("h", "held", {}, never).catch((e: unknown) => e);
    expect(await waitFor(() => seen().length === 2)).toBe(true);
    clocks.get("hang")?.abort();
    expect(((await hung) as McpError).code).toBe(ErrorCode.RequestTimeout);
    // Answered on the cancel: it was failed, "was stopped: a call to 'hang' outlasted timeout_s".
    const [first] = pidsIn(pids);
    expect(await other).toEqual({ isError: false, text: `answered by ${first}` });
    // Killed all the same once nothing was in flight on it, and started afresh on next use.
    expect(await waitFor(() => !alive(first as number))).toBe(true);
    const next = await pool.call("h", "echo", {}, never);
    expect(pidsIn(pids)).toHaveLength(2);
    expect(next.text).toBe(`answered by ${pidsIn(pids)[1]}`);
  });
}, 30_000);

test("a call made while a timed-out server drains waits for it to go and reaches a fresh one; its tools are listed meanwhile", async () => {
  await withHeld(async (pool, { pids, seen }, clocks) => {
    for (const tool of ["hang1", "hang2"]) clocks.set(tool, new AbortController());
    const first = pool.call("h", "hang1", {}, never).catch((e: unknown) => e);
    const second = pool.call("h", "hang2", {}, never).catch((e: unknown) => e);
    expect(await waitFor(() => seen().length === 2)).toBe(true);
    clocks.get("hang1")?.abort();
    expect(((await first) as McpError).code).toBe(ErrorCode.RequestTimeout);
    const [old] = pidsIn(pids) as [number];
    // Not killed while the second call is in flight, and its tools are read without a wait.
    expect(alive(old)).toBe(true);
    expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
    const waiting = pool.call("h", "echo", {}, never);
    clocks.get("hang2")?.abort();
    // Its own timeout, not the first call's kill ("was stopped: …", ConnectionClosed).
    expect(((await second) as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect(await waitFor(() => !alive(old))).toBe(true);
    // Never sent to the draining server: a fresh one answered it.
    expect((await waiting).text).toBe(`answered by ${pidsIn(pids)[1]}`);
    expect(seen()).toEqual(["hang1", "hang2", "echo"]);
  });
}, 30_000);

/**
 * Two calls held (hang1, hang2), then hang1's clock run out: the server drains for hang2. Returns
 * hang2's outcome (wrapped: an async function's promise would wait for it); `also` are more tools whose clocks the test ends.
 */
async function drainingFor(
  pool: McpPool,
  seen: () => string[],
  clocks: Map<string, AbortController>,
  also: string[],
): Promise<{ second: Promise<unknown> }> {
  for (const tool of ["hang1", "hang2", ...also]) clocks.set(tool, new AbortController());
  const first = pool.call("h", "hang1", {}, never).catch((e: unknown) => e);
  const second = pool.call("h", "hang2", {}, never).catch((e: unknown) => e);
  expect(await waitFor(() => seen().length === 2)).toBe(true);
  clocks.get("hang1")?.abort();
  expect(((await first) as McpError).code).toBe(ErrorCode.RequestTimeout);
  return { second };
}

test("a call made while a timed-out server drains waits at most its own timeout_s, never reaching a server", async () => {
  await withHeld(async (pool, { pids, seen }, clocks) => {
    const { second } = await drainingFor(pool, seen, clocks, ["echo"]);
    // Its own clock runs out while hang2 still holds the draining server: it ends then, a
    // timeout (retryable), not after the other call's timeout_s and a fresh start.
    const waiting = pool.call("h", "echo", {}, never).catch((e: unknown) => e);
    clocks.get("echo")?.abort();
    clocks.get("hang2")?.abort();
    const late = await waiting;
    expect((late as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect((late as McpError).message).toContain("timeout_s");
    expect(((await second) as McpError).code).toBe(ErrorCode.RequestTimeout);
    // Never sent anywhere: the draining server was sent nothing, and no fresh one was started for it.
    expect(seen()).toEqual(["hang1", "hang2"]);
    expect(pidsIn(pids)).toHaveLength(1);
  });
}, 30_000);

test("a call that waited for a draining server and then runs out of its timeout_s on the fresh one does not kill that one", async () => {
  await withHeld(async (pool, { pids, seen }, clocks) => {
    const { second } = await drainingFor(pool, seen, clocks, ["hang3"]);
    const third = pool.call("h", "hang3", {}, never).catch((e: unknown) => e);
    clocks.get("hang2")?.abort();
    await second;
    // Sent to the fresh server with what was left of its timeout_s; that running out is its
    // timeout, but the fresh server did not have a whole timeout_s to answer: it is kept.
    expect(await waitFor(() => seen().length === 3)).toBe(true);
    clocks.get("hang3")?.abort();
    expect(((await third) as McpError).code).toBe(ErrorCode.RequestTimeout);
    const next = await pool.call("h", "echo", {}, never);
    expect(pidsIn(pids)).toHaveLength(2);
    expect(next.text).toBe(`answered by ${pidsIn(pids)[1]}`);
  });
}, 30_000);
