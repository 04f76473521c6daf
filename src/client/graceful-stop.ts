import { MAX_TIMER_MS } from "../util/timer-limit.ts";
import type { Connection } from "./connection.ts";
import type { CoreProcess } from "./core-process.ts";
import type { ClientLogger } from "./host-types.ts";
import { shutdownKillAt } from "./shutdown-timing.ts";
import type { StatusResult } from "./types.ts";

/**
 * Stops a running core the polite way: the `shutdown` request (the core cancels its chats,
 * stops llama-server and its MCP servers, then answers), end of input, then the wait for its
 * exit, and a kill only past `timeoutMs` and never before shutdown-timing.ts allows.
 */
export async function stopGracefully(
  connection: Connection,
  proc: CoreProcess,
  options: { timeoutMs: number; stopGraceMs: number; logger?: ClientLogger | undefined },
): Promise<void> {
  const startedAt = Date.now();
  const timing = { startedAt, timeoutMs: options.timeoutMs, stopGraceMs: options.stopGraceMs };
  let answeredAt: number | undefined;
  try {
    // The answer means llama-server and the MCP servers are stopped: only then is a kill safe.
    const patience = shutdownKillAt(timing) - startedAt;
    await connection.sendNow<StatusResult>(proc, "shutdown", {}, patience);
    answeredAt = Date.now();
  } catch (err) {
    options.logger?.warn(`shutdown request failed: ${(err as Error).message}`);
  }
  proc.endInput();
  const left = Math.max(0, shutdownKillAt({ ...timing, answeredAt }) - Date.now());
  if (await withinMs(proc.waitForExit(), left)) return;
  options.logger?.warn(`core did not exit within ${Date.now() - startedAt} ms of shutdown; killing it`);
  proc.kill("SIGKILL");
  await proc.gone();
}

/** True when the promise settles within `ms`; the timer never outlives it (it would hold a Node host open). */
async function withinMs(promise: Promise<unknown>, ms: number): Promise<boolean> {
  // A wait past what a timer can hold is as good as none (the connection treats it the same).
  if (ms > MAX_TIMER_MS) return promise.then(() => true);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
