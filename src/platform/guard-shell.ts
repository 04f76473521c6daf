import { existsSync } from "node:fs";

/**
 * What the two guards share (agent/mcp/guard.ts for MCP servers, plan/probe-guard.ts for probes):
 * each is a script for `/bin/sh -c`, which forks a watcher and then `exec`s the command, and each
 * hands that shell the command the same way, for the same two reasons.
 * - The DYLD_* variables come as `NAME=value` arguments before the command (a `--` after them)
 *   and are exported only then: macOS removes every DYLD_* from the environment of a
 *   SIP-protected binary as it starts, /bin/sh included, so in the environment they would never
 *   reach the command (a llama-server that finds its libraries through DYLD_LIBRARY_PATH failed
 *   its probes; an MCP server lost what its config's `env` set).
 * - The command is an absolute path, found by the caller as spawn finds it: the shell's `exec`
 *   would look a name up in PATH again, and a relative path starting with "-" reaches the
 *   kernel as it is, which runs a #! line as `/bin/sh -tools/server` (read as options).
 */
export const GUARD_SHELL = "/bin/sh";

/** Whether a guard can run here: a POSIX shell, so not Windows. */
export function guardShellAvailable(platform: NodeJS.Platform = process.platform): boolean {
  return platform !== "win32" && existsSync(GUARD_SHELL);
}

/** What SIP strips, as a name the shell can `export` (another is left in the environment). */
const DYLD_NAME = /^DYLD_[A-Za-z0-9_]*$/;

/**
 * Exports the `NAME=value` arguments up to the `--` and shifts them and it off "$@". It sets no
 * variable: this shell's environment is the command's, and a count kept in `n` overwrote the
 * config's own `n` (every DYLD_* argument starts with DYLD_, so none is the `--`).
 */
const DYLD_EXPORTS = `while [ "$1" != -- ]; do export "$1"; shift; done; shift
`;

/**
 * The argv and environment that run the guard `script` (shown as `name` in `ps`), whose "$@" is
 * `path args…`, with `env`: its DYLD_* as arguments, the rest as the shell's environment.
 */
export function guardShellLaunch(
  script: string,
  name: string,
  path: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): { argv: string[]; env: Record<string, string> } {
  const shellEnv: Record<string, string> = {};
  const dyld: string[] = [];
  for (const [key, value] of Object.entries(env)) {
    if (DYLD_NAME.test(key)) dyld.push(`${key}=${value}`);
    else shellEnv[key] = value;
  }
  const argv = [GUARD_SHELL, "-c", DYLD_EXPORTS + script, name, ...dyld, "--", path, ...args];
  return { argv, env: shellEnv };
}
