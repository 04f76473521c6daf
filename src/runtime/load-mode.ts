import { statSync } from "node:fs";
import { runWithTimeout } from "../plan/probe.ts";
import { childEnv } from "./child-env.ts";

/**
 * The plan writes `llama.mmap: false` and `llama.mlock: true` as `--no-mmap` and `--mlock`,
 * which every llama-server with those settings understands up to build b10587 (where they are
 * already "DEPRECATED in favor of `--load-mode`", recording help.txt). Later builds dropped them
 * and refuse to start ("error: invalid argument: --no-mmap", a build of commit de3ff81); builds
 * before `--load-mode` know only them. So at launch, a server that lists `--load-mode` in its
 * `--help` gets that instead. Only a plan with one of the two flags pays for asking.
 */

const LEGACY = new Set(["--no-mmap", "--mlock"]);

export function usesLegacyMemoryFlags(argv: readonly string[]): boolean {
  return argv.some((a) => LEGACY.has(a));
}

/** `--no-mmap` / `--mlock` as the one `--load-mode` that means the same. */
export function toLoadMode(argv: readonly string[]): string[] {
  if (!usesLegacyMemoryFlags(argv)) return [...argv];
  const mmap = !argv.includes("--no-mmap");
  const mlock = argv.includes("--mlock");
  const mode = mmap ? (mlock ? "mmap+mlock" : "mmap") : mlock ? "mlock" : "none";
  return [...argv.filter((a) => !LEGACY.has(a)), "--load-mode", mode];
}

/** Whether a llama-server binary takes `--load-mode`, asked once per file version. */
export type LoadModeProbe = (
  binary: string,
  parentEnv: Record<string, string | undefined>,
) => Promise<boolean>;

const answers = new Map<string, boolean>();

export const probeLoadMode: LoadModeProbe = async (binary, parentEnv) => {
  let key: string;
  try {
    const st = statSync(binary);
    key = `${binary}\0${st.size}\0${st.mtimeMs}`;
  } catch {
    return false; // the launch reports a missing binary
  }
  const known = answers.get(key);
  if (known !== undefined) return known;
  // The environment llama-server would get, less the key: printing help needs none.
  const { LLAMA_API_KEY: _key, ...env } = childEnv(parentEnv, "");
  const r = await runWithTimeout(binary, ["--help"], 10_000, env);
  const speaks = r.kind === "exit" && /(^|\s)--load-mode\b/m.test(`${r.stdout}\n${r.stderr}`);
  // A failed or slow answer is not remembered: the next start asks again.
  if (r.kind === "exit") answers.set(key, speaks);
  return speaks;
};

/** The argv to launch: the plan's, with its memory flags in the dialect `binary` speaks. */
export async function launchArgv(
  binary: string,
  argv: readonly string[],
  parentEnv: Record<string, string | undefined>,
  probe: LoadModeProbe = probeLoadMode,
): Promise<string[]> {
  if (!usesLegacyMemoryFlags(argv)) return [...argv];
  return (await probe(binary, parentEnv)) ? toLoadMode(argv) : [...argv];
}
