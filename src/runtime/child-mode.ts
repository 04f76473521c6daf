import { tmpdir } from "node:os";
import { join } from "node:path";
import { runWithTimeout } from "../plan/probe.ts";
import { binaryVersion } from "./binary-version.ts";
import { probeEnv } from "./child-env.ts";
import { STATE_PREFIX } from "./child-state.ts";

/**
 * llama-server's router-child mode (docs/supervisor.md#child-mode,
 * test/fixtures/llama-server/transcripts/90; llama.cpp's server-models.cpp, `server_child`), as the
 * core uses it to keep no orphan: started with LLAMA_SERVER_ROUTER_PORT in its environment and
 * stdin a pipe the core holds, llama-server exits on stdin's EOF, which the OS delivers however the
 * core ends (a SIGKILL included), and stops cleanly on the exit line. It is an internal protocol of
 * llama.cpp's router, so whether a binary speaks it is learned from what it does (it prints state
 * lines), never from its version, and remembered per file version.
 */

/** The variable that makes llama-server a router's child: only its presence is read. */
export const ROUTER_PORT_VAR = "LLAMA_SERVER_ROUTER_PORT";
/**
 * Its value: a port, as the router passes its own; 1 (tcpmux) is one where no router of ours
 * listens, should a later build ever call back.
 */
export const CHILD_MODE_ENV: Readonly<Record<string, string>> = { [ROUTER_PORT_VAR]: "1" };
/** The line the router writes to stop a child (CMD_ROUTER_TO_CHILD_EXIT): the polite stop. */
export const EXIT_LINE = "cmd_router_to_child:exit";

const PROBE_TIMEOUT_MS = 10_000;
const book = new Map<string, boolean>();

/** Whether this version of `binary` speaks child mode: undefined until a launch or probe showed it. */
export async function knownChildMode(binary: string): Promise<boolean | undefined> {
  const key = await binaryVersion(binary);
  return key === undefined ? undefined : book.get(key);
}

export async function rememberChildMode(binary: string, speaks: boolean): Promise<void> {
  const key = await binaryVersion(binary);
  if (key !== undefined) book.set(key, speaks);
}

/**
 * Asks the binary without a model to load: started as a child with a model path that does not
 * exist, a build that speaks it prints its first `loading` line before it opens the file, then
 * fails to load and exits (about 50 ms). Null when it did not exit in time (not remembered).
 */
export async function probeChildMode(
  binary: string,
  parentEnv: Record<string, string | undefined>,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<boolean | null> {
  const nowhere = join(tmpdir(), `local-ai-child-mode-probe-${crypto.randomUUID()}.gguf`);
  const args = ["-m", nowhere, "--host", "127.0.0.1", "--port", "0"];
  const r = await runWithTimeout(binary, args, timeoutMs, { ...probeEnv(parentEnv), ...CHILD_MODE_ENV });
  if (r.kind !== "exit") return null;
  const speaks = r.stdout.split("\n").some((line) => line.startsWith(STATE_PREFIX));
  await rememberChildMode(binary, speaks);
  return speaks;
}

/** What `doctor` reports: what a launch of this version showed, else the probe's answer. */
export async function childModeOf(
  binary: string,
  parentEnv: Record<string, string | undefined>,
): Promise<boolean | null> {
  return (await knownChildMode(binary)) ?? (await probeChildMode(binary, parentEnv));
}
