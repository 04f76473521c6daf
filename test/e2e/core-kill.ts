import { expect } from "bun:test";
import { isAlive } from "../../src/runtime/proc-info.ts";
import type { spawnCore } from "../fixtures/core-process.ts";
import { killQuietly } from "../fixtures/kill-quietly.ts";

// What the e2e tests of issue 19 share: the llama-servers a core started, looked up as
// processes (not from its records), and how long after a SIGKILL of the core they are gone.

type Core = ReturnType<typeof spawnCore>;

/** The core's llama-server children, by parent pid and program (pgrep -P). */
export function llamaChildren(core: Core, program: string): number[] {
  return Bun.spawnSync(["pgrep", "-P", String(core.proc.pid), "-f", program])
    .stdout.toString()
    .split("\n")
    .filter(Boolean)
    .map(Number);
}

/**
 * SIGKILLs the core and waits up to `withinMs` for every one of `pids` to be gone (an exited
 * orphan that lingers unreaped as a zombie counts as gone). Resolves with the milliseconds from
 * the kill until the last went, or null when one was still there at the end.
 */
export async function killCoreAndTime(core: Core, pids: number[], withinMs: number): Promise<number | null> {
  core.proc.kill("SIGKILL");
  const t0 = performance.now();
  await core.proc.exited;
  const deadline = t0 + withinMs;
  while (performance.now() < deadline) {
    if (pids.every((p) => !isAlive(p))) return Math.round(performance.now() - t0);
    await Bun.sleep(5);
  }
  return pids.every((p) => !isAlive(p)) ? Math.round(performance.now() - t0) : null;
}

/** With LOCAL_AI_TEST_TIMINGS=1, prints a measured time (the numbers of docs/supervisor.md). */
export function noteTiming(what: string, ms: number | null): void {
  if (process.env.LOCAL_AI_TEST_TIMINGS === "1")
    process.stderr.write(`timing: ${what}: ${ms ?? "not gone"} ms\n`);
}

/**
 * The test of each state: the core has one llama-server child (`program`); a SIGKILL of the
 * core leaves it gone within `withinMs` (the time noted as `what`), or the test fails.
 */
export async function expectGoneAfterCoreKill(
  core: Core,
  program: string,
  withinMs: number,
  what: string,
): Promise<void> {
  const servers = llamaChildren(core, program);
  expect(servers.length).toBe(1);
  try {
    const ms = await killCoreAndTime(core, servers, withinMs);
    noteTiming(what, ms);
    expect(ms).not.toBeNull();
  } finally {
    killQuietly(...servers);
  }
}
