import { accessSync, constants, existsSync, statSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import type { Config } from "./schema.ts";

/**
 * Where llama-server is: the configured path, else next to this executable, else on PATH
 * (docs/supervisor.md). Returns the paths tried when none exists, so errors can list them.
 */
export interface FindBinaryEnv {
  execPath: string;
  platform: string;
  pathEnv: string | undefined;
  isFile(path: string): boolean;
  /** Whether this user may run it; absent: every file may be. */
  isExecutable?(path: string): boolean;
}

const realEnv = (): FindBinaryEnv => ({
  execPath: process.execPath,
  platform: process.platform,
  pathEnv: process.env.PATH,
  isFile: (p) => {
    try {
      return existsSync(p) && statSync(p).isFile();
    } catch {
      return false;
    }
  },
  isExecutable: (p) => {
    if (process.platform === "win32") return true;
    try {
      accessSync(p, constants.X_OK);
      return (statSync(p).mode & 0o111) !== 0;
    } catch {
      return false;
    }
  },
});

export function findLlamaServer(
  config: Pick<Config, "llama">,
  env: FindBinaryEnv = realEnv(),
): { path: string } | { tried: string[] } {
  if (config.llama.binary) {
    return env.isFile(config.llama.binary) ? { path: config.llama.binary } : { tried: [config.llama.binary] };
  }
  const names = env.platform === "win32" ? ["llama-server.exe"] : ["llama-server"];
  const dirs = [dirname(env.execPath), ...(env.pathEnv ?? "").split(delimiter).filter(Boolean)];
  // PATH often names a folder twice (or the executable's own): each place is looked at once.
  const seen = new Set<string>();
  const tried: string[] = [];
  // As a shell's PATH search: a file without the execute bit is passed over, so a stray copy
  // (an unzipped download) does not hide a working one further on. Found nowhere else, it is
  // still the answer, for doctor to say `chmod +x` rather than "not found".
  let notExecutable: string | undefined;
  for (const dir of dirs) {
    for (const name of names) {
      const candidate = join(dir, name);
      const key = env.platform === "win32" ? candidate.toLowerCase() : candidate;
      if (seen.has(key)) continue;
      seen.add(key);
      tried.push(candidate);
      if (!env.isFile(candidate)) continue;
      if (env.isExecutable?.(candidate) ?? true) return { path: candidate };
      notExecutable ??= candidate;
    }
  }
  return notExecutable === undefined ? { tried } : { path: notExecutable };
}

/** The llama-server that will run, when there is one (none found is the launch's to report). */
export function llamaServerOf(config: Pick<Config, "llama">, env?: FindBinaryEnv): string | undefined {
  const found = findLlamaServer(config, env);
  return "path" in found ? found.path : undefined;
}
