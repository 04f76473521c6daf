import { windowsPidAlive } from "../../src/platform/windows/process.ts";
import type { spawnCore } from "../fixtures/core-process.ts";
import type { CommandRun, Exchange, Msg } from "./observations.ts";

/** What the Windows-side host's scenarios share: a timed request, a command run, a wait for a pid to go. */

export type Core = ReturnType<typeof spawnCore>;

/** A request with its events and terminal message; a timeout is an observation (terminal null), not a throw. */
export async function exchange(
  core: Core,
  msg: { id: string | number; method: string; params?: unknown },
  ms = 30_000,
): Promise<Exchange> {
  const t0 = performance.now();
  const from = core.messages.length;
  let terminal: Msg | null = null;
  try {
    terminal = await core.request(msg, ms);
  } catch {
    // Left null: the verdict says what did not come.
  }
  const events = core.messages.slice(from).filter((m) => m.id === msg.id && m.type === "event");
  return { terminal, events, ms: Math.round(performance.now() - t0) };
}

/** Runs the core (or any program) to its end, with a deadline. */
export async function runCommand(argv: string[], cwd: string, ms = 60_000): Promise<CommandRun> {
  const t0 = performance.now();
  const proc = Bun.spawn(argv, { cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe", windowsHide: true });
  const timer = setTimeout(() => proc.kill(), ms);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderrTail: stderr.slice(-2000), ms: Math.round(performance.now() - t0) };
}

/**
 * Alive by two independent readings: kernel32 (the code under test) and Bun's own
 * process.kill(pid, 0) (libuv's OpenProcess + GetExitCodeProcess). Either one seeing it counts.
 */
export function seenAlive(pid: number): boolean {
  let viaKill = false;
  try {
    process.kill(pid, 0);
    viaKill = true;
  } catch {
    // Gone, or not ours to see.
  }
  return windowsPidAlive(pid) === true || viaKill;
}

/** Milliseconds until none of `pids` is alive, polling; null when one still lives after `ms`. */
export async function goneWithin(pids: number[], ms: number): Promise<number | null> {
  const t0 = performance.now();
  while (pids.some(seenAlive)) {
    if (performance.now() - t0 > ms) return null;
    await Bun.sleep(50);
  }
  return Math.round(performance.now() - t0);
}

/** The llama-server pid `status` reports, or null. */
export function llamaPidOf(status: Msg | null): number | null {
  const pid = status?.result?.llama?.pid;
  return typeof pid === "number" ? pid : null;
}
