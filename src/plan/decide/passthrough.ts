import type { Decision } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import { shownArgs } from "../secret-args.ts";

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
