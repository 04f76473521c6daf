import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stopChild } from "../../src/runtime/launch-steps.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { FAKE_SERVER_SCRIPT } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { lineWritten } from "../fixtures/wait.ts";
import { makeSupervisor, rejection, waitFor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

/** The processes `pid` started, as Linux lists them (its main thread's children). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * Ends a process the test expected gone, so a failing run leaves nothing behind. Gone or a zombie
 * (isAlive): orphaned once its shell died, it is init's to collect, which on this box's container
 * took ~1.5 s though it was dead and its memory freed at once.
 */
async function goneOrKilled(pid: number): Promise<boolean> {
  const gone = await waitFor(() => !isAlive(pid), { timeoutMs: 3000, intervalMs: 5 });
  if (!gone) process.kill(pid, "SIGKILL");
  return gone;
}

/** Whether the process whose pid a wrapper wrote to `pidFile` ends (goneOrKilled). */
async function recordedGone(pidFile: string): Promise<boolean> {
  const pid = Number(readFileSync(pidFile, "utf8"));
  expect(pid).toBeGreaterThan(0);
  return goneOrKilled(pid);
}

/** A ready supervisor whose llama.binary is a shell that runs a server without child mode, not by `exec`. */
async function readyBehindWrapper(dir: string) {
  const wrapper = join(dir, "wrapper");
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexport FAKE_LLAMA_NO_CHILD_MODE=1 FAKE_LLAMA_LOAD_MS=20\n"${process.execPath}" "${FAKE_SERVER_SCRIPT}" "$@"\n`,
    { mode: 0o755 },
  );
  const { supervisor } = makeSupervisor(dir, { options: { findBinary: () => ({ path: wrapper }) } });
  const lease = await supervisor.acquire(never());
  lease.release();
  const shell = supervisor.snapshot().pid as number;
  const [server] = childrenOf(shell);
  expect(server).toBeGreaterThan(0);
  return { supervisor, shell, server: server as number };
}

// A wrapper named as llama.binary that runs llama-server without `exec` (docs/supervisor.md
// suggests a wrapper for a GPU's environment): a signal to the shell alone never reached it.
describe.skipIf(process.platform === "win32")("a llama.binary wrapper that does not exec", () => {
  test("never ready: the start gives up, and what the wrapper started is killed with it", async () => {
    await using dir = tmpdir();
    const wrapper = join(dir.path, "wrapper");
    const pidFile = join(dir.path, "inner.pid");
    writeFileSync(wrapper, `#!/bin/sh\nsh -c 'echo $$ > ${pidFile}; exec sleep 60'\n`, { mode: 0o755 });
    const { supervisor } = makeSupervisor(dir.path, {
      settings: { startupTimeoutMs: 800 },
      options: { findBinary: () => ({ path: wrapper }) },
    });
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("internal_error");
    expect(await recordedGone(pidFile)).toBe(true);
  });

  test.skipIf(process.platform !== "linux")(
    "a build without child mode: stop() ends the llama-server the wrapper runs, not the shell alone",
    async () => {
      await using dir = tmpdir();
      const { supervisor, server } = await readyBehindWrapper(dir.path);
      await supervisor.stop();
      expect(await goneOrKilled(server)).toBe(true);
    },
  );

  test("a shell that exits on its own, its llama-server still running: the failed start kills it", async () => {
    await using dir = tmpdir();
    const wrapper = join(dir.path, "wrapper");
    const pidFile = join(dir.path, "inner.pid");
    // A wrapper that leaves its server in the background and exits (or a shell a user killed).
    writeFileSync(wrapper, `#!/bin/sh\nsleep 60 &\necho $! > ${pidFile}\nexit 3\n`, { mode: 0o755 });
    const { supervisor } = makeSupervisor(dir.path, { options: { findBinary: () => ({ path: wrapper }) } });
    await rejection(supervisor.acquire(never()));
    expect(await recordedGone(pidFile)).toBe(true);
  });

  test.skipIf(process.platform !== "linux")(
    "a ready server's shell killed: the crash kills the llama-server its group still runs",
    async () => {
      await using dir = tmpdir();
      const { supervisor, shell, server } = await readyBehindWrapper(dir.path);
      process.kill(shell, "SIGKILL");
      expect(await goneOrKilled(server)).toBe(true);
      await supervisor.stop();
    },
  );

  test("a SIGTERM that ends the shell first: the llama-server that ignores it still gets the kill", async () => {
    await using dir = tmpdir();
    const wrapper = join(dir.path, "wrapper");
    const pidFile = join(dir.path, "inner.pid");
    // The inner process ignores SIGTERM (a llama-server busy loading or streaming); the shell dies of it.
    writeFileSync(wrapper, `#!/bin/sh\nsh -c 'trap "" TERM; echo $$ > ${pidFile}; exec sleep 60'\n`, {
      mode: 0o755,
    });
    const child = bunSpawner({ path: wrapper, argv: [], env: {} });
    expect(await waitFor(() => lineWritten(pidFile))).toBe(true);
    const inner = Number(readFileSync(pidFile, "utf8"));
    await stopChild(child, 300);
    expect(await goneOrKilled(inner)).toBe(true);
  });
});
