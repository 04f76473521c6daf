import { existsSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

/** dist/local-ai, built once when missing (`npm test` builds it first anyway). */
export function hostBinary(): string {
  const exe = join(ROOT, "dist", process.platform === "win32" ? "local-ai.exe" : "local-ai");
  if (!existsSync(exe)) {
    const built = Bun.spawnSync([process.execPath, "build.ts", "--single"], { cwd: ROOT, stderr: "pipe" });
    if (built.exitCode !== 0) throw new Error(`building ${exe} failed: ${built.stderr.toString()}`);
  }
  return exe;
}
