import { CLIENT_DEFAULTS, type LocalAiClientOptions } from "./client-options.ts";
import type { Connection } from "./connection.ts";
import { CoreProcess, type CoreProcessHandlers } from "./core-process.ts";
import type { InitializeResult } from "./types.ts";

/**
 * One launch of the core: spawn `local-ai serve-stdio` (its stdout lines routed to the
 * connection, its stderr to the host) and run the initialize handshake on it. The client's
 * lifecycle (client.ts) decides when to launch and what an exit means.
 */

/** Spawns the core; `ends.onExit` hears of this process's end, once. */
export function spawnCore(
  options: LocalAiClientOptions,
  connection: Connection,
  ends: Pick<CoreProcessHandlers, "onExit" | "onOutputClosed" | "onInputClosed" | "onInputStalled">,
): CoreProcess {
  return new CoreProcess(
    {
      command: options.binary,
      args: options.args ?? ["serve-stdio", ...(options.config ? ["--config", options.config] : [])],
      cwd: options.cwd,
      env: options.env,
      maxLineBytes: options.maxLineBytes ?? CLIENT_DEFAULTS.maxLineBytes,
      stderrTailLines: options.stderrTailLines ?? CLIENT_DEFAULTS.stderrTailLines,
      // A core that leaves its input unread as long as a call may wait is hung.
      inputStallMs: options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs,
      spawn: options.spawn,
    },
    {
      onLine: (line) => connection.receive(line),
      onOversizeLine: (bytes, head) =>
        connection.oversizeLine(bytes, head, options.maxLineBytes ?? CLIENT_DEFAULTS.maxLineBytes),
      onStderrLine: (line) => options.onStderr?.(line),
      ...ends,
    },
  );
}

/** The handshake, within the request time limit; a core that fails it is killed. */
export async function initializeCore(
  options: LocalAiClientOptions,
  connection: Connection,
  proc: CoreProcess,
): Promise<InitializeResult> {
  try {
    return await connection.sendNow<InitializeResult>(
      proc,
      "initialize",
      options.initialize ?? { protocol_versions: [1] },
      options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs,
    );
  } catch (err) {
    proc.retire();
    throw err;
  }
}
