import { z } from "zod";
import { argSecrets } from "../util/arg-secrets.ts";
import { SECRET_FLAGS, URL_FLAGS } from "../util/llama-secret-flags.ts";

/**
 * Whether `arg` is a flag and a credential written as one entry (`- --api-key sk-…` in a block
 * list, `["--api-key sk-…"]`): one of llama-server's secret flags first, or a credential in its
 * words as arg-secrets.ts finds them on a command line.
 * llama-server reads it as one unknown flag and exits quoting it whole ("invalid argument:
 * --api-key sk-…", in its log and a failed start's log_tail), and no mask knows its shape: the
 * plan's argv, the log's start line and the child's command line showed the value as written.
 */
function flagWithCredential(arg: string): boolean {
  if (!arg.startsWith("-") || !/\s/.test(arg)) return false;
  const words = arg.trim().split(/\s+/);
  // As llama-server reads a flag: `--hf_token` is `--hf-token` (plan/argv.ts llamaFlagName).
  const first = (words[0] ?? "").replace(/=.*$/s, "");
  const flag = first.startsWith("--") ? first.replaceAll("_", "-") : first;
  return SECRET_FLAGS.has(flag) || URL_FLAGS.has(flag) || argSecrets(words).some((s) => s !== "");
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
