import type { Decision } from "../../protocol/plan.ts";
import { flags, llamaFlagName } from "../argv.ts";
import { shownArgs } from "../secret-args.ts";
import { logPrivacyWarnings } from "./log-privacy.ts";

/** `--jinja`, always: tool calling needs the model's own chat template to render tools. */
export function jinjaDecision(): Decision {
  return {
    name: "jinja",
    value: true,
    source: "auto",
    flags: flags.jinja(true),
    reason: "the model's chat template renders tools, which tool calling needs",
  };
}

/** `llama.extra_args`, passed through after every planned flag (so they win); none: no line. */
export function extraArgsDecision(extraArgs: readonly string[]): Decision | null {
  if (extraArgs.length === 0) return null;
  const shown = shownArgs(extraArgs);
  return {
    name: "extra_args",
    value: shown.join(" "),
    source: "config",
    flags: shown,
    reason: "llama.extra_args, passed through last (they win over planned flags)",
  };
}

/**
 * Flags naming the file llama-server loads, by the key the plan read it from: a path, or where it
 * downloads one from (a hub repo, a URL, a Docker Hub model), which then wins over the path.
 */
const FILE_FLAGS: ReadonlyMap<string, string> = new Map([
  ["-m", "model.path"],
  ["--model", "model.path"],
  ["-hf", "model.path"],
  ["-hfr", "model.path"],
  ["--hf-repo", "model.path"],
  ["-mu", "model.path"],
  ["--model-url", "model.path"],
  ["-dr", "model.path"],
  ["--docker-repo", "model.path"],
  ["-mm", "model.mmproj"],
  ["--mmproj", "model.mmproj"],
  ["-mmu", "model.mmproj"],
  ["--mmproj-url", "model.mmproj"],
]);

/**
 * `-m`/`--mmproj` in extra_args: llama-server takes the last one given, so it loads that file, not
 * the one the plan read, checked and sized (the fingerprint of saved KV state follows the file it
 * loads: agent/kv). The launch goes ahead, as the host asked; the plan's memory is another file's.
 */
function fileFlagWarnings(extraArgs: readonly string[]): string[] {
  return extraArgs.flatMap((arg) => {
    const flag = llamaFlagName(arg);
    const key = FILE_FLAGS.get(flag);
    // The flag alone: a URL's value may hold a user and password (secret-args.ts).
    return key
      ? [
          `llama.extra_args ${flag}: llama-server loads that file, not ${key}'s, which this plan read and sized: its memory and checks are not for the file that runs`,
        ]
      : [];
  });
}

/** What the plan warns of in extra_args: flags that keep the conversation (log-privacy.ts), another file. */
export function extraArgsWarnings(extraArgs: readonly string[]): string[] {
  return [...logPrivacyWarnings(extraArgs), ...fileFlagWarnings(extraArgs)];
}
