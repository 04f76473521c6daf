import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { compile, TARGETS } from "../compile.ts";

/**
 * The Windows executables the suite runs: the core exactly as `bun build.ts` ships it, and
 * three test programs compiled for the same runtime: the llama-server stand-in, the MCP test
 * server and the Windows-side host that drives them all.
 */

const WINDOWS = TARGETS.find((t) => t.os === "windows")!;
const REPO = join(import.meta.dir, "..", "..");

export const EXES = {
  core: "local-ai.exe",
  llama: "llama-server.exe",
  mcp: "mcp-test-server.exe",
  host: "host.exe",
} as const;

const TEST_PROGRAMS: [keyof typeof EXES, string][] = [
  ["llama", "test/windows/stand-in.ts"],
  ["mcp", "test/fixtures/mcp-test-server.ts"],
  ["host", "test/windows/host.ts"],
];

async function compileTestProgram(entry: string, outfile: string): Promise<void> {
  const result = await Bun.build({
    entrypoints: [join(REPO, entry)],
    compile: { target: WINDOWS.bun as never, outfile },
  });
  if (!result.success) throw new AggregateError(result.logs, `cannot build ${entry} for Windows`);
}

/** Builds the four executables into `bin`; returns each one's path. */
export async function buildExes(bin: string): Promise<Record<keyof typeof EXES, string>> {
  mkdirSync(bin, { recursive: true });
  const path = (k: keyof typeof EXES) => join(bin, EXES[k]);
  await compile(WINDOWS, path("core"));
  for (const [key, entry] of TEST_PROGRAMS) await compileTestProgram(entry, path(key));
  return { core: path("core"), llama: path("llama"), mcp: path("mcp"), host: path("host") };
}
