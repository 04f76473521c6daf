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

export function findLlamaServer(
  config: Pick<Config, "llama">,
  env: FindBinaryEnv,
): { path: string } | { tried: string[] } {
  if (config.llama.binary) {
    return env.isFile(config.llama.binary) ? { path: config.llama.binary } : { tried: [config.llama.binary] };
  }
  const tried: string[] = [];
  // As a shell's PATH search: a file without the execute bit is passed over, so a stray copy
  // (an unzipped download) does not hide a working one further on. Found nowhere else, it is
  // still the answer, for doctor to say `chmod +x` rather than "not found".
  let notExecutable: string | undefined;
  for (const candidate of candidatesOf(config, env)) {
    tried.push(candidate);
    if (!env.isFile(candidate)) continue;
    if (env.isExecutable?.(candidate) ?? true) return { path: candidate };
    notExecutable ??= candidate;
  }
  return notExecutable === undefined ? { tried } : { path: notExecutable };
}

/** Where findLlamaServer looks, in its order: `llama.binary`, else beside the executable, then PATH. */
export function candidatesOf(
  config: Pick<Config, "llama">,
  env: Pick<FindBinaryEnv, "execPath" | "platform" | "pathEnv">,
): string[] {
  if (config.llama.binary) return [config.llama.binary];
  const names = env.platform === "win32" ? ["llama-server.exe"] : ["llama-server"];
  const dirs = [dirname(env.execPath), ...(env.pathEnv ?? "").split(delimiter).filter(Boolean)];
  // PATH often names a folder twice (or the executable's own): each place is looked at once.
  const seen = new Set<string>();
  const out: string[] = [];
  for (const dir of dirs) {
    for (const name of names) {
      const candidate = join(dir, name);
      const key = env.platform === "win32" ? candidate.toLowerCase() : candidate;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(candidate);
    }
  }
  return out;
}
