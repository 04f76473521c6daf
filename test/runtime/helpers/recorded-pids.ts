import { readdirSync } from "node:fs";
import { join } from "node:path";
import { readRecord, runDir } from "../../../src/runtime/pid-file.ts";

/** The pids that a data directory's llama-server records name (kept-aside ones included). */
export function recordedPids(dataDir: string): number[] {
  const names = readdirSync(runDir(dataDir)).filter((n) => n.endsWith(".json"));
  return names.map((n) => (readRecord(join(runDir(dataDir), n), undefined) as { pid: number }).pid);
}
