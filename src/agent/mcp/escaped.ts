import {
  descendantsOf,
  linuxProc,
  type ProcEntry,
  type ProcReader,
  signalSame,
} from "../../platform/process-tree.ts";

/**
 * What an MCP server started that left its process group (a `setsid`, a browser launched
 * detached, as Puppeteer does): the guard's signals go to the group and miss it, and once the
 * server has exited it belongs to init and can no longer be found as the server's. So a stop looks
 * for it while the server still lives, and ends it after the server: SIGTERM, then SIGKILL after
 * ESCAPED_GRACE_MS, each only to a process that is still the one seen. Linux only (process-tree.ts);
 * one that leaves after the look, or whose server exits by itself first, is beyond it.
 */
export const ESCAPED_GRACE_MS = 200;

/**
 * The server's descendants outside its group (the guard made the server its group's leader); the
 * core looks after each tool call, so only the server's tree is read (process-tree.ts).
 */
export function escapedFrom(serverPid: number, proc: ProcReader = linuxProc): ProcEntry[] {
  return descendantsOf(serverPid, proc).filter((e) => e.pgid !== serverPid);
}

/** Ends what `escapedFrom` found; resolves at once when nothing of it is left. */
export async function endEscaped(found: readonly ProcEntry[], proc: ProcReader = linuxProc): Promise<void> {
  if (found.length === 0 || signalSame(found, "SIGTERM", proc) === 0) return;
  await Bun.sleep(ESCAPED_GRACE_MS);
  signalSame(found, "SIGKILL", proc);
}
