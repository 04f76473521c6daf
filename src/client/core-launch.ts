import { statSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { boundedWaitMs, CLIENT_DEFAULTS, type LocalAiClientOptions } from "./client-options.ts";
import type { Connection } from "./connection.ts";
import { CoreProcess, type CoreProcessHandlers } from "./core-process.ts";
import { callError } from "./errors.ts";
import type { InitializeResult } from "./types.ts";
import { asText, clip, isObject } from "./wire-lines.ts";

/**
 * One launch of the core: spawn `local-ai serve-stdio` (its stdout lines routed to the
 * connection, its stderr to the host) and run the initialize handshake on it. The client's
 * lifecycle (client.ts) decides when to launch and what an exit means.
 */

/** Spawns the core; `ends.onExit` hears of this process's end, once. */
export function spawnCore(
  options: LocalAiClientOptions,
  connection: Connection,
  ends: Pick<
    CoreProcessHandlers,
    "onExit" | "onOutputClosed" | "onInputClosed" | "onInputStalled" | "onKillIgnored"
  >,
): CoreProcess {
  const { command, cwd } = launchPlace(options);
  // Its lines settle only calls written to it: one replaced but still read (a grandchild holding
  // its stdout) settled calls written to the next, naming their id or their line's size.
  const proc: CoreProcess = new CoreProcess(
    {
      command,
      args: options.args ?? ["serve-stdio", ...(options.config ? ["--config", options.config] : [])],
      cwd,
      env: options.env,
      maxLineBytes: options.maxLineBytes ?? CLIENT_DEFAULTS.maxLineBytes,
      stderrTailLines: options.stderrTailLines ?? CLIENT_DEFAULTS.stderrTailLines,
      // A core that leaves its input unread as long as a call may wait is hung.
      inputStallMs: options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs,
      spawn: options.spawn,
    },
    {
      onLine: (line, cut) => connection.receive(line, proc, cut),
      onOversizeLine: (bytes, head, cut) =>
        connection.oversizeLine(bytes, head, options.maxLineBytes ?? CLIENT_DEFAULTS.maxLineBytes, proc, cut),
      onStderrLine: (line) => options.onStderr?.(line),
      ...ends,
    },
  );
  return proc;
}

/**
 * The command and folder the core runs with. Given no config (nor cwd, nor args) the core reads
 * `config.yaml` from its working folder (docs/bootstrap.md): the host's, which it did not choose,
 * so a host started in a downloaded folder ran whatever that folder's config named
 * (`llama.binary: ./evil.sh` ran at doctor). It runs in the binary's folder instead, as trusted
 * as the binary, by its absolute path: spawn resolves a relative command against the cwd. A bare
 * name is found on PATH and has no folder to name: the host's stays, and the logger says so.
 */
function launchPlace(options: LocalAiClientOptions): { command: string; cwd: string | undefined } {
  const binary = options.binary;
  // "" is none, as config's is: Node's spawn takes it so, a replacement spawn need not.
  if (options.cwd || options.config || options.args)
    return { command: binary, cwd: options.cwd || undefined };
  if (basename(binary) === binary) {
    options.logger?.warn(
      `no config, cwd or args given and the binary ${binary} is found on PATH: the core reads config.yaml ` +
        `from this process's working folder; name config or cwd`,
    );
    return { command: binary, cwd: undefined };
  }
  const command = resolve(binary);
  const folder = dirname(command);
  // A folder that is not there is the binary's ENOENT, not a cwd's (spawn-failure.ts).
  return { command, cwd: isFolder(folder) ? folder : undefined };
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The handshake, within requestTimeoutMs but never unbounded (boundedWaitMs): the core answers
 * initialize at once, config or not (docs/protocol.md "Lifecycle"). A core that fails it is killed.
 */
export async function initializeCore(
  options: LocalAiClientOptions,
  connection: Connection,
  proc: CoreProcess,
): Promise<InitializeResult> {
  const params = options.initialize ?? { protocol_versions: [1] };
  try {
    const result = await connection.sendNow<unknown>(
      proc,
      "initialize",
      params,
      boundedWaitMs(options.requestTimeoutMs),
    );
    const asked: unknown = params.protocol_versions;
    const broken = brokenAnswer(result, Array.isArray(asked) ? asked : [1]);
    if (broken)
      throw callError("protocol_error", `the core sent a broken initialize result: ${broken}`, "initialize");
    return result as InitializeResult;
  } catch (err) {
    proc.retire();
    throw err;
  }
}

/**
 * What is wrong with an answer to initialize, if anything: start() promises the host `info`
 * (its version, server and capabilities), and a `null` one had the host's own `client.info.capabilities`
 * throw, far from the cause; a version it did not ask for speaks a protocol it does not know.
 */
function brokenAnswer(result: unknown, asked: readonly unknown[]): string | undefined {
  if (!isObject(result)) return `not an object: ${clip(asText(result))}`;
  if (typeof result.protocol_version !== "number" || !asked.includes(result.protocol_version))
    return `protocol_version ${clip(asText(result.protocol_version))}, not one of those asked for (${asked.join(", ")})`;
  const { server, capabilities } = result;
  if (!isObject(server) || typeof server.name !== "string" || typeof server.version !== "string")
    return "no server object with a name and a version";
  if (!isObject(capabilities)) return "no capabilities object";
  // What a host reads first (`capabilities.methods.includes("pull")`): lists, or its own TypeError.
  if (!Array.isArray(capabilities.methods) || !Array.isArray(capabilities.events))
    return "capabilities without methods and events lists";
  return undefined;
}
