import { answersAtAll } from "../llama/health.ts";
import { abortable } from "../util/abortable.ts";
import { childRunning } from "./proc-info.ts";

/** The socket look's wait: a slow answer is not a refusal. */
const LISTEN_CHECK_MS = 1000;

/**
 * Whether a server we started is gone though its exit has not been seen (Bun reports an exit on
 * a later tick, so a SIGKILL of a moment ago is not known yet): the look before a lease
 * (docs/supervisor.md). On Linux /proc settles it without a round trip (no entry, a zombie, or
 * on its way out: proc-info.ts `childRunning`); elsewhere a connection to its port does (refused,
 * or closed before any answer). A live process that refuses its port is caught by the request
 * itself (lease.reconnect).
 */
export async function goneUnseen(pid: number, port: number, signal: AbortSignal): Promise<boolean> {
  const running = childRunning(pid);
  if (running !== undefined) return !running;
  return !(await abortable(answersAtAll(port, LISTEN_CHECK_MS), signal));
}
