import { accessSync, constants, statSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import type { LoadedConfig } from "../config/schema.ts";

/**
 * Interim local version (the planner engineer owns the real one): the configured path, else
 * next to our own executable, else each PATH entry. Returns every path tried when none works,
 * so `binary_missing` can name them.
 */
export function findLlamaServer(config: LoadedConfig): { path: string } | { tried: string[] } {
  const exe = process.platform === "win32" ? "llama-server.exe" : "llama-server";
  const tried: string[] = [];
  const configured = config.config.llama.binary;
  const candidates = configured
    ? [configured]
    : [
        join(dirname(process.execPath), exe),
        ...(process.env.PATH ?? "")
          .split(delimiter)
          .filter(Boolean)
          .map((dir) => join(dir, exe)),
      ];
  for (const candidate of candidates) {
    tried.push(candidate);
    if (isExecutable(candidate)) return { path: candidate };
  }
  return { tried };
}

function isExecutable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    if (process.platform !== "win32") accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
