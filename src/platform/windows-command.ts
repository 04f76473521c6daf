import crossSpawn from "cross-spawn";

/** What to spawn for a configured command: the argv, and whether it is already quoted. */
export interface SpawnArgv {
  argv: string[];
  /** The argv is a cmd.exe line escaped by hand: Bun must pass it as it is. */
  verbatim: boolean;
}

/**
 * On Windows an MCP server named as `npx`, `uvx` or any other `.cmd`/`.bat` shim cannot be
 * spawned as it stands: CreateProcess runs executables only, and PATH lookup there knows no
 * PATHEXT. cross-spawn (what the MCP SDK itself spawns servers with) resolves the command
 * through PATH and PATHEXT, reads shebangs, and for a shim builds the `cmd.exe /d /s /c "…"` line
 * with every argument escaped twice where a node_modules/.bin shim parses it again — the part
 * that is easy to get subtly wrong by hand. Elsewhere it hands the command back unchanged.
 */
export function spawnArgv(
  command: string,
  args: readonly string[],
  options: { env: Record<string, string>; cwd?: string | undefined },
): SpawnArgv {
  const parsed = crossSpawn._parse(command, [...args], { env: options.env, cwd: options.cwd });
  return {
    argv: [parsed.command, ...parsed.args],
    verbatim: parsed.options.windowsVerbatimArguments === true,
  };
}

/**
 * Where a configured command is, as spawning it would find it: through the server's own PATH
 * (its `env`, else the core's), and on Windows PATHEXT too (`npx` is `npx.cmd` there). Null when
 * it is not found. For doctor, which checks the command without starting it.
 */
export function resolvedCommand(command: string, env: Record<string, string | undefined>): string | null {
  const PATH = env.PATH ?? process.env.PATH ?? "";
  if (process.platform === "win32") {
    const parsed = crossSpawn._parse(command, [], {
      env: { ...process.env, ...env, PATH } as Record<string, string>,
    });
    return parsed.file ?? null;
  }
  return Bun.which(command, { PATH });
}
