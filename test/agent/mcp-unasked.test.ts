import { describe, expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { ErrorCode, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { ChildTransport } from "../../src/agent/mcp/child-transport.ts";
import { LineReader, MAX_LINE_BYTES } from "../../src/agent/mcp/line-reader.ts";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { MIN_MESSAGE_COST, UNASKED_LIMITS, UnaskedBudget } from "../../src/agent/mcp/unasked-budget.ts";
import { loopLag } from "../fixtures/loop-lag.ts";
import { hostileServer, pidsIn } from "../fixtures/mcp-hostile.ts";
import { alive } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

const never = new AbortController().signal;
/** Where each line a server sent is parsed and handed on (private: spied on). */
const transport = ChildTransport.prototype as unknown as { deliver(line: Buffer): void };
const hostile = (mode: string, pids: string, timeout_s = 20) => hostileServer(mode, pids, timeout_s);

/** A pool of `mode` with a burst of 1 MiB and next to no refill; HALF_BYTES set to `half`. */
function oneMiBPool(mode: string, pids: string, half: number): McpPool {
  const cfg = hostile(mode, pids);
  const unasked = { burstBytes: 2 ** 20, bytesPerSecond: 1 };
  return new McpPool([{ ...cfg, env: { ...cfg.env, HALF_BYTES: String(half) } }], Date.now, undefined, {
    unasked,
  });
}

describe("MCP servers that send what no call asked for", () => {
  test("an idle server flooding 1 MB notifications is killed within a bound, the loop stays free, the next use starts it again", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile("idle-flood", pids)]);
    try {
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
      // Its flood begins once this call is answered: its start (tools vetted a loop turn a tool)
      // is over, so the kill comes to a started server, as an idle one's does.
      await pool.call("h", "echo", {}, never);
      // What the loop parsed of the flood (each line handed on), counted from here.
      let parsed = 0;
      const original = transport.deliver;
      const deliver = spyOn(transport, "deliver").mockImplementation(function (this: unknown, line: Buffer) {
        parsed += line.length;
        original.call(this, line);
      });
      const lag = loopLag();
      const [first] = pidsIn(pids);
      try {
        // Without the budget it floods for as long as it runs.
        expect(await waitFor(() => !alive(first as number), { timeoutMs: 5000 })).toBe(true);
      } finally {
        deliver.mockRestore();
      }
      // The loop spent on the flood what the budget allows (its burst, a line, a few seconds'
      // refill), not what the server sends; a backstop on its longest gap a loaded machine does not reach.
      expect(parsed).toBeLessThanOrEqual(UNASKED_LIMITS.burstBytes + 2 * 1024 * 1024);
      expect(lag.stop()).toBeLessThan(2000);
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
      expect(pidsIn(pids)).toHaveLength(2);
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a server writing to stderr without end is killed like a flood of notifications, not read for its life", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile("stderr-flood", pids)]);
    // It floods once it has listed: the kill may come while its tools are vetted (a loop turn a
    // tool), then the start fails saying why, or after the start: either way it is killed.
    const started = () =>
      pool.tools("h", never).then(
        (tools) => tools.map((t) => t.name),
        (err: Error) => {
          expect(err.message).toContain("it sent more than any call asked for");
          return "killed while starting";
        },
      );
    try {
      const first = await started();
      expect([["echo"], "killed while starting"]).toContainEqual(first);
      const [pid] = pidsIn(pids);
      // Unbudgeted, reading it took most of a CPU for as long as it ran (a hostile review).
      expect(await waitFor(() => !alive(pid as number), { timeoutMs: 5000 })).toBe(true);
      // A start that failed is not made again at once (its back-off); one that was killed after
      // its start is, at the next use.
      if (first === "killed while starting") return;
      expect([["echo"], "killed while starting"]).toContainEqual(await started());
      expect(pidsIn(pids)).toHaveLength(2);
    } finally {
      await pool.close();
    }
  }, 30_000);

  // Each had a budget of its own: a server could make the core read twice the documented rate.
  test("stderr and unasked stdout share one budget: each under it, together over it, the server is killed", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    // 600 KB on each stream.
    const pool = oneMiBPool("both-halves", pids, 600_000);
    try {
      // Sent once it has listed: the kill may come while its tools are vetted (the start then
      // fails saying why) or after the start.
      const started = await pool.tools("h", never).then(
        (tools) => tools.map((t) => t.name),
        (err: Error) => {
          expect(err.message).toContain("it sent more than any call asked for");
          return "killed while starting";
        },
      );
      expect([["echo"], "killed while starting"]).toContainEqual(started);
      const [first] = pidsIn(pids);
      expect(await waitFor(() => !alive(first as number), { timeoutMs: 5000 })).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);

  // The stream read last was blamed: 100 KB of stderr "wrote to stderr over 1 MiB".
  test("a server killed for the shared budget is told so, not blamed on the stream read last", async () => {
    using scratch = tmpdir();
    const pool = oneMiBPool("notify-then-stderr", join(scratch.path, "pids"), 1_000_000);
    try {
      expect((await pool.call("h", "echo", {}, never)).text).toBe("first");
      const err = (await pool.call("h", "echo", {}, never).catch((e: unknown) => e)) as McpError;
      expect(err.message).toContain("was stopped: it sent more than any call asked for");
      expect(err.message).toContain("stderr");
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a server flooding progress notifications during a call is killed at once, not after timeout_s", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile("call-flood", pids, 20)]);
    try {
      const started = Date.now();
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect((err as McpError).code).toBe(ErrorCode.ConnectionClosed);
      // The call's result says why, not only "Connection closed".
      expect((err as McpError).message).toContain("was stopped: it sent more than any call asked for");
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await waitFor(() => !alive(pidsIn(pids)[0] as number), { timeoutMs: 3000 })).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a cancelled call's server that goes on flooding is killed", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile("cancel-flood", pids, 20)]);
    try {
      await pool.tools("h", never);
      const abort = new AbortController();
      setTimeout(() => abort.abort(new Error("cancelled")), 50);
      // A cancelled call does not kill its server (docs/agent.md); its flood after the cancel does.
      await pool.call("h", "echo", {}, abort.signal).catch(() => {});
      expect(await waitFor(() => !alive(pidsIn(pids)[0] as number), { timeoutMs: 5000 })).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);

  /** Two calls to one server in `mode`, each answered with `bytes` of text, and no restart. */
  async function leftAlone(mode: string, bytes: number): Promise<void> {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile(mode, pids)]);
    try {
      for (let i = 0; i < 2; i++) expect((await pool.call("h", "echo", {}, never)).text.length).toBe(bytes);
      expect(pidsIn(pids)).toHaveLength(1);
    } finally {
      await pool.close();
    }
  }

  test("a server that reports progress 50 times a second and answers with 10 MB is left alone", async () => {
    await leftAlone("polite", 10_000_000);
  }, 30_000);

  // The SDK matches an answer by Number(id): one whose id came as text was charged as unasked.
  test("answers whose ids come as text are asked for: a 6 MB result is no flood", async () => {
    await leftAlone("string-ids", 6_000_000);
  }, 30_000);
});

describe("the unasked budget and the line reader", () => {
  test("the budget refills at its rate up to its burst, and each message costs at least MIN_MESSAGE_COST", () => {
    let t = 0;
    const budget = new UnaskedBudget({ burstBytes: 10_000, bytesPerSecond: 1000 }, () => t);
    expect(budget.take(9000)).toBe(true);
    expect(budget.room(1000)).toBe(true);
    expect(budget.take(1)).toBe(true); // costs MIN_MESSAGE_COST
    expect(budget.room(1000 - MIN_MESSAGE_COST + 1)).toBe(false);
    t = 60_000; // a minute refills no more than the burst
    expect(budget.room(10_000)).toBe(true);
    expect(budget.take(10_001)).toBe(false);
  });

  test("lines are joined across chunks; a line past MAX_LINE_BYTES throws", () => {
    const r = new LineReader();
    const enc = (s: string) => new TextEncoder().encode(s);
    expect(r.push(enc('{"a":'))).toEqual([]);
    expect(r.pending).toBe(5);
    expect(r.push(enc('1}\n{"b":2}\n{"c"')).map(String)).toEqual(['{"a":1}', '{"b":2}']);
    expect(r.pending).toBe(4);
    r.clear();
    expect(() => r.push(new Uint8Array(MAX_LINE_BYTES + 1))).toThrow("longer than");
  });

  // A server writing a byte at a time: each chunk kept as it came cost ~175 bytes of heap, so
  // 2 MB of a line held about 300 MB (a 16 MiB line, about 1 GB).
  test("a line dripped a byte a chunk holds about its bytes, not a chunk's worth each", () => {
    const r = new LineReader();
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    // As a pipe's read hands them: each byte a view of a buffer of its own.
    for (let i = 0; i < 2_000_000; i++) r.push(new Uint8Array(128).subarray(0, 1).fill(97));
    Bun.gc(true);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(32 * 1024 * 1024);
    expect(r.pending).toBe(2_000_000);
    const [line] = r.push(new TextEncoder().encode("b\n"));
    expect(line?.length).toBe(2_000_001);
    expect(line?.at(-1)).toBe(98);
  });
});
