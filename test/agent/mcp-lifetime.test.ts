import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { EOF_GRACE_MS, NOTE_EVERY_MS, spawnMcpServer, TERM_GRACE_MS } from "../../src/agent/mcp/child.ts";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { killQuietly } from "../fixtures/kill-quietly.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { MCP_SERVER } from "./harness.ts";

// MCP servers must not outlive the core, even when it is SIGKILLed (the guard: docs/agent.md,
// "MCP process lifetime"). isAlive counts a zombie as gone: an orphan is reaped by init, late.

const HOLDER = join(import.meta.dir, "..", "fixtures", "mcp-pool-holder.ts");
const never = new AbortController().signal;

const pidsIn = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : [];

/** A server entry whose pid goes to `<name>.pid` and its own child's to `<name>.grandchild`. */
function server(dir: string, name: string, env: Record<string, string> = {}) {
  return {
    name,
    command: process.execPath,
    args: [MCP_SERVER],
    env: {
      MCP_TEST_PIDS: join(dir, `${name}.pid`),
      MCP_TEST_GRANDCHILD: join(dir, `${name}.grandchild`),
      ...env,
    },
  };
}
const pidsOf = (dir: string, name: string) => ({
  server: pidsIn(join(dir, `${name}.pid`))[0] as number,
  grandchild: pidsIn(join(dir, `${name}.grandchild`))[0] as number,
});

/** A process holding a pool of `servers`, once it says they are up: the core as a SIGKILL finds it. */
async function holding(servers: ReturnType<typeof server>[]) {
  const holder = Bun.spawn([process.execPath, HOLDER, JSON.stringify(servers)], {
    stdout: "pipe",
    env: process.env,
  });
  const { value } = await holder.stdout.getReader().read();
  expect(new TextDecoder().decode(value)).toBe("ready\n");
  return holder;
}

describe.skipIf(process.platform === "win32")("MCP servers die with the core", () => {
  test("SIGKILL of the process that holds the pool: a server ignoring EOF and SIGTERM, its own child and a second server are gone within 5 s", async () => {
    using dir = tmpdir();
    const holder = await holding([
      server(dir.path, "a", { MCP_TEST_MODE: "stubborn" }),
      server(dir.path, "b"),
    ]);
    const a = pidsOf(dir.path, "a");
    const b = pidsOf(dir.path, "b");
    const pids = [a.server, a.grandchild, b.server, b.grandchild];
    try {
      expect(pids.every((p) => p > 0 && isAlive(p))).toBe(true);
      holder.kill("SIGKILL");
      await holder.exited;
      const started = Date.now();
      expect(await waitFor(() => !pids.some(isAlive), { timeoutMs: 5000 })).toBe(true);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      killQuietly(...pids);
    }
  }, 30_000);

  // docs/agent.md, "The guard": the watcher notes what the server started outside its group
  // while the server lives (the core's death is its stdin's end too), and ends it with the group.
  test.skipIf(process.platform !== "linux")(
    "SIGKILL of the holder: a child the server started in a session of its own, ignoring SIGTERM, is gone within 5 s too",
    async () => {
      using dir = tmpdir();
      const file = join(dir.path, "a.detached");
      const holder = await holding([
        server(dir.path, "a", { MCP_TEST_MODE: "stubborn", MCP_TEST_DETACHED: file }),
      ]);
      const a = pidsOf(dir.path, "a");
      const [detached] = pidsIn(file) as [number];
      const pids = [a.server, a.grandchild, detached];
      try {
        expect(pids.every((p) => p > 0 && isAlive(p))).toBe(true);
        holder.kill("SIGKILL");
        await holder.exited;
        expect(await waitFor(() => !pids.some(isAlive), { timeoutMs: 5000 })).toBe(true);
      } finally {
        killQuietly(...pids);
      }
    },
    30_000,
  );

  // The core tells the guard what it saw outside the group (child.ts noteEscaped): a server that
  // exits by itself leaves a detached child the guard can no longer find as its own, and the
  // guard ends it from what it was told.
  test.skipIf(process.platform !== "linux")(
    "a server that exits by itself: the detached child the core noted is ended by the guard",
    async () => {
      using dir = tmpdir();
      const file = join(dir.path, "detached");
      const child = spawnMcpServer({
        command: "/bin/sh",
        args: ["-c", `sleep 0.2; setsid sleep 1000 & echo $! > ${file}; read x; exit 0`],
        env: getDefaultEnvironment(),
      });
      // Asked at once (nothing to see yet), then again within the second: that look comes later.
      child.noteEscaped();
      expect(await waitFor(() => existsSync(file) && readFileSync(file, "utf8").endsWith("\n"))).toBe(true);
      const detached = Number(readFileSync(file, "utf8"));
      try {
        expect(isAlive(detached)).toBe(true);
        child.noteEscaped();
        await Bun.sleep(NOTE_EVERY_MS + 300);
        await child.write("bye\n");
        await child.exited;
        expect(await waitFor(() => !isAlive(detached), { timeoutMs: 3000 })).toBe(true);
      } finally {
        killQuietly(detached);
      }
    },
    30_000,
  );

  /** Starts one server in a pool, closes the pool; how long close() took. */
  async function closeAndTime(env: Record<string, string>, check: (closeMs: number) => void) {
    using dir = tmpdir();
    const pool = new McpPool([McpServerSchema.parse(server(dir.path, "a", env))]);
    await pool.tools("a", never);
    const { server: pid, grandchild } = pidsOf(dir.path, "a");
    try {
      expect(isAlive(grandchild)).toBe(true);
      const started = Date.now();
      await pool.close();
      check(Date.now() - started);
      expect(isAlive(pid)).toBe(false); // close() saw it go
      expect(await waitFor(() => !isAlive(grandchild), { timeoutMs: 2000 })).toBe(true);
    } finally {
      killQuietly(pid, grandchild);
    }
  }

  test("a clean stop takes the server's own child too, though both ignore SIGTERM", async () => {
    // It outlives stdin's end and SIGTERM: SIGKILL after both graces.
    await closeAndTime({ MCP_TEST_MODE: "stubborn" }, (ms) =>
      expect(ms).toBeGreaterThanOrEqual(EOF_GRACE_MS + TERM_GRACE_MS - 50),
    );
  }, 30_000);

  test("a server that exits on stdin's end is stopped at once, and its own child goes with it", async () => {
    await closeAndTime({}, (ms) => expect(ms).toBeLessThan(EOF_GRACE_MS));
  }, 30_000);

  // docs/agent.md, "The guard": a child that left the group (setsid) is found while the server
  // lives and ended after it; before, it ran on after a clean shutdown.
  test.skipIf(process.platform !== "linux")(
    "a clean stop ends a child the server started in a session of its own, though it ignores SIGTERM",
    async () => {
      using dir = tmpdir();
      const file = join(dir.path, "a.detached");
      const pool = new McpPool([McpServerSchema.parse(server(dir.path, "a", { MCP_TEST_DETACHED: file }))]);
      await pool.tools("a", never);
      const [detached] = pidsIn(file) as [number];
      const { server: pid, grandchild } = pidsOf(dir.path, "a");
      try {
        expect(isAlive(detached)).toBe(true);
        const sid = (p: number) =>
          Number(readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1]!.split(" ")[3]);
        expect(sid(detached)).toBe(detached);
        await pool.close();
        // SIGKILL was sent before close() resolved; the kernel's exit may take a moment more.
        expect(await waitFor(() => !isAlive(detached), { timeoutMs: 3000 })).toBe(true);
      } finally {
        killQuietly(pid, grandchild, detached);
      }
    },
    30_000,
  );

  test("a server that crashes takes its own child along, and the next use starts it again", async () => {
    using dir = tmpdir();
    const pool = new McpPool([McpServerSchema.parse(server(dir.path, "a"))]);
    await pool.tools("a", never);
    const first = pidsOf(dir.path, "a");
    try {
      await expect(pool.call("a", "crash", {}, never)).rejects.toThrow();
      expect(await waitFor(() => !isAlive(first.grandchild), { timeoutMs: 2000 })).toBe(true);
      expect(await waitFor(() => !isAlive(first.server), { timeoutMs: 2000 })).toBe(true);
      expect((await pool.call("a", "echo", { text: "again" }, never)).text).toBe("echo: again");
      expect(pidsIn(join(dir.path, "a.pid"))).toHaveLength(2);
    } finally {
      await pool.close();
      killQuietly(first.server, first.grandchild);
    }
  }, 30_000);

  test.skipIf(process.platform !== "linux")(
    "the server gets the allowlisted environment and its config's env, nothing more of the core's",
    async () => {
      using dir = tmpdir();
      process.env.LOCAL_AI_TEST_SECRET = "not for MCP servers";
      const pool = new McpPool([McpServerSchema.parse(server(dir.path, "a"))]);
      try {
        await pool.tools("a", never);
        const { server: pid } = pidsOf(dir.path, "a");
        const names = readFileSync(`/proc/${pid}/environ`, "utf8")
          .split("\0")
          .filter(Boolean)
          .map((kv) => kv.slice(0, kv.indexOf("=")));
        const allowed = new Set([
          ...Object.keys(getDefaultEnvironment()),
          "MCP_TEST_PIDS",
          "MCP_TEST_GRANDCHILD",
          // What a POSIX shell sets before it execs (dash: PWD; bash as sh adds these).
          "PWD",
          "OLDPWD",
          "SHLVL",
          "_",
        ]);
        expect(names).toContain("MCP_TEST_PIDS");
        expect(names.filter((n) => !allowed.has(n))).toEqual([]);
      } finally {
        delete process.env.LOCAL_AI_TEST_SECRET;
        await pool.close();
        killQuietly(pidsOf(dir.path, "a").grandchild);
      }
    },
    30_000,
  );

  test("stop() unguarded, as where no POSIX shell is: stdin's end, SIGTERM, then SIGKILL of a stubborn server", async () => {
    using dir = tmpdir();
    const child = spawnMcpServer(
      {
        command: process.execPath,
        args: [MCP_SERVER],
        env: { ...getDefaultEnvironment(), MCP_TEST_MODE: "stubborn", MCP_TEST_PIDS: join(dir.path, "pid") },
      },
      false,
    );
    expect(child.guarded).toBe(false);
    expect(await waitFor(() => pidsIn(join(dir.path, "pid")).length === 1)).toBe(true);
    const started = Date.now();
    await child.stop();
    expect(Date.now() - started).toBeGreaterThanOrEqual(EOF_GRACE_MS + TERM_GRACE_MS - 50);
    expect(isAlive(child.pid)).toBe(false);
  }, 30_000);

  test("a command that cannot be run is refused at spawn, in the words spawn uses", () => {
    const env = { PATH: "/nonexistent" };
    expect(() => spawnMcpServer({ command: "no-such-mcp-server", args: [], env }, true)).toThrow(
      'Executable not found in $PATH: "no-such-mcp-server"',
    );
    expect(() => spawnMcpServer({ command: "/nonexistent/mcp", args: [], env }, true)).toThrow("ENOENT");
    expect(() => spawnMcpServer({ command: MCP_SERVER, args: [], env }, true)).toThrow("EACCES");
  });
});
