import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_PROBE_OUTPUT_BYTES, runWithTimeout } from "../../src/plan/run-probe.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { killQuietly } from "../fixtures/kill-quietly.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { lineWritten, waitFor } from "../fixtures/wait.ts";

// A probe's output and its end (plan/run-probe.ts): a tool that writes without end is stopped
// with bounded memory, and one that exits leaving a child on its pipes answers by its exit.
const onPosix = process.platform !== "win32";

function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe.skipIf(!onPosix)("a probe's run", () => {
  test("once a signal killed the running probes, a probe asked after it is not started", async () => {
    using dir = tmpdir();
    const marker = join(dir.path, "started");
    const path = script(dir.path, "next-probe", `echo $$ > '${marker}'\nexec sleep 30`);
    // In a process of its own: the stop is the whole process's (cli/run.ts calls it on a signal).
    // The command goes on a moment after the signal: its next probe must not outlive the exit.
    const code = `
      import { killRunningProbes, runWithTimeout } from ${JSON.stringify(join(import.meta.dir, "../../src/plan/run-probe.ts"))};
      killRunningProbes();
      console.log(JSON.stringify(await runWithTimeout(${JSON.stringify(path)}, [], 5_000)));
    `;
    const proc = Bun.spawn([process.execPath, "-e", code], { stdout: "pipe", stderr: "inherit" });
    const out = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    const started = existsSync(marker) ? Number(readFileSync(marker, "utf8")) : undefined;
    if (started) killQuietly(started);
    expect(started).toBeUndefined();
    expect(JSON.parse(out)).toMatchObject({ kind: "error" });
  });

  test("one that writes without end is ended past MAX_PROBE_OUTPUT_BYTES, not read until its timeout", async () => {
    using dir = tmpdir();
    const t0 = performance.now();
    const r = await runWithTimeout(script(dir.path, "flood", "exec yes"), [], 20_000);
    expect(r).toEqual({ kind: "error", message: `it wrote more than ${MAX_PROBE_OUTPUT_BYTES} bytes` });
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  test("one that exits with a child holding its pipes answers by its exit, at once", async () => {
    using dir = tmpdir();
    const pidFile = join(dir.path, "child.pid");
    const path = script(dir.path, "leaves-child", `echo ready\nsleep 30 &\necho $! > '${pidFile}'\nexit 0`);
    const t0 = performance.now();
    const r = await runWithTimeout(path, [], 10_000);
    const ms = performance.now() - t0;
    const child = Number(readFileSync(pidFile, "utf8"));
    try {
      expect(r).toEqual({ kind: "exit", code: 0, stdout: "ready\n", stderr: "" });
      expect(ms).toBeLessThan(5000);
    } finally {
      if (Number.isInteger(child) && child > 0) process.kill(child, "SIGKILL");
    }
  });

  test("a child that floods the pipes after the probe exited sends no signal to the probe's reaped pid", async () => {
    using dir = tmpdir();
    const pidFile = join(dir.path, "probe.pid");
    // The probe exits at once; what it left writes past the bound within the wait after the exit,
    // as soon as the probe is reaped (a fixed 50 ms sleep first came too late on a loaded box).
    const path = script(
      dir.path,
      "leaves-flood",
      `echo $$ > '${pidFile}'\n(while kill -0 $$ 2>/dev/null; do :; done; head -c ${MAX_PROBE_OUTPUT_BYTES + 65536} /dev/zero) &\nexit 0`,
    );
    const signalled: number[] = [];
    const kill = process.kill;
    process.kill = ((pid: number, sig?: string | number) => {
      signalled.push(pid);
      return kill.call(process, pid, sig);
    }) as typeof process.kill;
    try {
      const r = await runWithTimeout(path, [], 10_000);
      expect(r).toEqual({ kind: "error", message: `it wrote more than ${MAX_PROBE_OUTPUT_BYTES} bytes` });
    } finally {
      process.kill = kill;
    }
    expect(signalled).not.toContain(Number(readFileSync(pidFile, "utf8")));
  });

  test("SIGKILL of the process that runs a hung probe: the probe and what it started are gone within 5 s", async () => {
    using dir = tmpdir();
    const pids = join(dir.path, "pids");
    // A GPU backend that hangs while starting, under a wrapper that does not exec it.
    const body = `sleep 300 &\necho "$$ $!" > '${pids}.tmp'\nmv '${pids}.tmp' '${pids}'\nwait`;
    const path = script(dir.path, "hung-probe", body);
    // The core as a SIGKILL finds it: its timers and its signal handlers never run again.
    const code = `
      import { runWithTimeout } from ${JSON.stringify(join(import.meta.dir, "../../src/plan/run-probe.ts"))};
      await runWithTimeout(${JSON.stringify(path)}, ["--list-devices"], 600_000);
    `;
    const core = Bun.spawn([process.execPath, "-e", code], { stdout: "ignore", stderr: "inherit" });
    let probe: number[] = [];
    try {
      expect(await waitFor(() => lineWritten(pids), { timeoutMs: 20_000 })).toBe(true);
      probe = readFileSync(pids, "utf8").trim().split(" ").map(Number);
      expect(probe.every((p) => p > 0 && isAlive(p))).toBe(true);
      core.kill("SIGKILL");
      await core.exited;
      expect(await waitFor(() => !probe.some(isAlive), { timeoutMs: 5000 })).toBe(true);
    } finally {
      core.kill("SIGKILL");
      killQuietly(...probe);
    }
  });

  test.skipIf(!existsSync("/proc/self/task"))(
    "a probe that ends by itself leaves no guard behind",
    async () => {
      using dir = tmpdir();
      const kids = join(dir.path, "children");
      // The probe's children as it runs: the guard's watcher (forked before the exec) and the `cat`.
      const path = script(dir.path, "quick-probe", `cat /proc/$$/task/$$/children > '${kids}'\necho ok`);
      expect(await runWithTimeout(path, [], 10_000)).toEqual({
        kind: "exit",
        code: 0,
        stdout: "ok\n",
        stderr: "",
      });
      const watchers = readFileSync(kids, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
      try {
        expect(watchers.length).toBe(2);
        expect(await waitFor(() => !watchers.some(isAlive), { timeoutMs: 5000 })).toBe(true);
      } finally {
        killQuietly(...watchers);
      }
    },
  );
  test("a probe named by a relative path that starts with a dash runs, as it did unguarded", async () => {
    using dir = tmpdir();
    // `llama.binary = "-build/bin/llama-server"` from the app's folder: the guard's `exec "$@"`
    // read it as an option of the shell's `exec` (and dash's has no `--`).
    mkdirSync(join(dir.path, "-build"));
    script(join(dir.path, "-build"), "probe", "echo ok");
    const cwd = process.cwd();
    process.chdir(dir.path);
    try {
      expect(await runWithTimeout("-build/probe", [], 10_000)).toEqual({
        kind: "exit",
        code: 0,
        stdout: "ok\n",
        stderr: "",
      });
    } finally {
      process.chdir(cwd);
    }
  });
  test.skipIf(!existsSync("/proc/self/task"))(
    "DYLD_* reach the probe without passing through the guard's shell's environment",
    async () => {
      using dir = tmpdir();
      const shellEnv = join(dir.path, "shell-env");
      // macOS strips every DYLD_* from a SIP-protected binary's environment as it starts, /bin/sh
      // included, so a probe exec'd by the guard lost DYLD_LIBRARY_PATH that the server keeps.
      // The guard's watcher is a fork of the shell: its environment is the one the shell got.
      const body = `kids=$(cat /proc/$$/task/$$/children)
for k in $kids; do tr '\\0' '\\n' 2>/dev/null < /proc/$k/environ; done > '${shellEnv}'
printf '%s|%s' "$DYLD_LIBRARY_PATH" "$DYLD_FRAMEWORK_PATH"`;
      const path = script(dir.path, "dyld-probe", body);
      const env = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        DYLD_LIBRARY_PATH: "/opt/llama lib",
        DYLD_FRAMEWORK_PATH: "a'b",
      };
      expect(await runWithTimeout(path, [], 10_000, env)).toEqual({
        kind: "exit",
        code: 0,
        stdout: "/opt/llama lib|a'b",
        stderr: "",
      });
      const seen = readFileSync(shellEnv, "utf8");
      expect(seen).toContain("PATH=");
      expect(seen).not.toContain("DYLD_");
    },
  );
  test("a probe killed (timeout or signal) takes its group: a daemon it left, not its child any more, too", async () => {
    using dir = tmpdir();
    const pidFile = join(dir.path, "daemon.pid");
    // A wrapper that starts its backend double-forked (reparented: no descendant of the probe)
    // and hangs: killing the probe's tree alone left the backend, on Linux as on macOS.
    const body = `(sleep 300 >/dev/null 2>&1 & echo $! > '${pidFile}.tmp')\nmv '${pidFile}.tmp' '${pidFile}'\nexec sleep 300`;
    const path = script(dir.path, "daemonizing-probe", body);
    // The kill is the one the timeout runs too; a process of its own, since it stops all probes.
    const code = `
      import { existsSync } from "node:fs";
      import { killRunningProbes, runWithTimeout } from ${JSON.stringify(join(import.meta.dir, "../../src/plan/run-probe.ts"))};
      const run = runWithTimeout(${JSON.stringify(path)}, [], 600_000);
      while (!existsSync(${JSON.stringify(pidFile)})) await Bun.sleep(5);
      killRunningProbes();
      console.log(JSON.stringify(await run));
    `;
    const proc = Bun.spawn([process.execPath, "-e", code], { stdout: "pipe", stderr: "inherit" });
    const out = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    const daemon = Number(readFileSync(pidFile, "utf8"));
    try {
      expect(daemon).toBeGreaterThan(0);
      expect(out).not.toBe("");
      expect(await waitFor(() => !isAlive(daemon), { timeoutMs: 5000 })).toBe(true);
    } finally {
      killQuietly(daemon);
    }
  });
  test("an executable file with no #! fails as the launch would, not run by the guard's shell", async () => {
    using dir = tmpdir();
    const marker = join(dir.path, "ran");
    // A wrapper written without its #! line: the server's spawn fails (ENOEXEC), and the guard's
    // `exec` ran it under /bin/sh, so --version and --list-devices said the binary was fine.
    const path = join(dir.path, "wrapper");
    writeFileSync(path, `touch '${marker}'\necho version: 1\n`);
    chmodSync(path, 0o755);
    expect(await runWithTimeout(path, ["--version"], 10_000)).toMatchObject({ kind: "error" });
    expect(existsSync(marker)).toBe(false);
  });

  test("without the guard (Windows) the probe joins the core's Job Object, so it dies with the core", async () => {
    using dir = tmpdir();
    const path = script(dir.path, "probe", 'echo "$$"');
    const joined: number[] = [];
    const r = await runWithTimeout(path, [], 5000, undefined, {
      platform: "win32",
      joinJob: (pid) => joined.push(pid) > 0,
    });
    expect(r).toMatchObject({ kind: "exit", code: 0 });
    // The pid the probe itself saw: the spawned process, joined before it could start much.
    expect(joined).toEqual([Number((r as { stdout: string }).stdout.trim())]);
  });

  test("under the guard the job is not used: the guard's own watcher ends the group", async () => {
    using dir = tmpdir();
    const path = script(dir.path, "probe", "exit 0");
    const joined: number[] = [];
    await runWithTimeout(path, [], 5000, undefined, {
      platform: "linux",
      joinJob: (pid) => joined.push(pid) > 0,
    });
    expect(joined).toEqual([]);
  });
});
