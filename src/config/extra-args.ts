import { z } from "zod";
import { argSecrets } from "../util/arg-secrets.ts";

/**
 * Whether `arg` is a flag and a credential written as one entry (`- --api-key sk-…` in a block
 * list, `["--api-key sk-…"]`): by its words, as arg-secrets.ts finds them on a command line.
 * llama-server reads it as one unknown flag and exits quoting it whole ("invalid argument:
 * --api-key sk-…", in its log and a failed start's log_tail), and no mask knows its shape: the
 * plan's argv, the log's start line and the child's command line showed the value as written.
 */
function flagWithCredential(arg: string): boolean {
  if (!arg.startsWith("-") || !/\s/.test(arg)) return false;
  return argSecrets(arg.trim().split(/\s+/)).some((s) => s !== "");
}

/**
 * `llama.extra_args` and a `models` entry's: strings passed to llama-server after the planned
 * flags, a flag and its credential as two entries (the value never quoted by the refusal).
 */
export const ExtraArgsSchema = z
  .array(
    z
      .string()
      .refine(
        (arg) => !flagWithCredential(arg),
        "a flag and its value written as one entry: write them as two entries ([--api-key, …]), as llama-server reads them",
      ),
  )
  .default([]);
