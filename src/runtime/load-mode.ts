import { type ArgvDialect, memoryFlagged, PLAN_DIALECT } from "../plan/argv.ts";
import type { LaunchPlan } from "../plan/launch-plan.ts";
import { runWithTimeout } from "../plan/probe.ts";
import { binaryVersion } from "./binary-version.ts";
import { probeEnv } from "./child-env.ts";

/**
 * Which memory flags a binary takes (plan/argv.ts `ArgvDialect`): builds up to b10587 take
 * `--no-mmap`/`--mlock` (b10587 lists both; test/fixtures/llama-server/transcripts/help.txt), later
 * ones only `--load-mode`, earlier ones only the pair. So at launch a binary that lists
 * `--load-mode` in its `--help` gets that; only a plan with memory flags pays for asking.
 */

/** Whether a llama-server binary takes `--load-mode`, asked once per file version. */
export type LoadModeProbe = (
  binary: string,
  parentEnv: Record<string, string | undefined>,
) => Promise<boolean>;

const answers = new Map<string, boolean>();

export const probeLoadMode: LoadModeProbe = async (binary, parentEnv) => {
  const key = await binaryVersion(binary);
  if (key === undefined) return false; // the launch reports a missing binary
  const known = answers.get(key);
  if (known !== undefined) return known;
  const r = await runWithTimeout(binary, ["--help"], 10_000, probeEnv(parentEnv));
  const speaks = r.kind === "exit" && /(^|\s)--load-mode\b/m.test(`${r.stdout}\n${r.stderr}`);
  // A failed or slow answer is not remembered: the next start asks again.
  if (r.kind === "exit") answers.set(key, speaks);
  return speaks;
};

/** The dialect to launch `plan` in: the report's unless its memory flags need the binary's own. */
export async function dialectFor(
  binary: string,
  plan: Pick<LaunchPlan, "mmap" | "mlock">,
  parentEnv: Record<string, string | undefined>,
  probe: LoadModeProbe = probeLoadMode,
): Promise<ArgvDialect> {
  if (!memoryFlagged(plan)) return PLAN_DIALECT;
  return (await probe(binary, parentEnv)) ? { memory: "load-mode" } : PLAN_DIALECT;
}
