import { llamaFlagName } from "../argv.ts";

/**
 * llama-server flags in `llama.extra_args` that put the conversation where the core cannot
 * take it out: its log at debug verbosity (every token, each request's slot), a log or prompt
 * folder of its own, or a log without the message prefix the core's redactor finds the ends of
 * quoted text by (`runtime/log-redact.ts`). Each is a plan warning, so `plan` and `doctor` say
 * it; the launch goes ahead, as the host asked (a debugging set-up), but what those flags write
 * outlives `sessions.delete` and `users.delete` (docs/supervisor.md, "Logs").
 */

/** llama.cpp's LOG_LEVEL_DEBUG: from here on messages quote tokens and prompts. */
const DEBUG_VERBOSITY = 5;

const VERBOSE = new Set(["-v", "--verbose", "--log-verbose"]);
const VERBOSITY = new Set(["-lv", "--verbosity", "--log-verbosity"]);
const OWN_FILES = new Set(["--log-file", "--log-prompts-dir"]);
const NO_PREFIX = new Set(["--no-log-prefix", "--no-log-timestamps"]);

const KEPT =
  "which the core's erase methods (sessions.delete, users.delete) cannot reach; for debugging only";

/**
 * The flag and its value, whether written `--flag value` or `--flag=value`; the flag as
 * llama-server reads it (`--log_file` is `--log-file`: argv.ts `llamaFlagName`).
 */
function flagsOf(args: readonly string[]): { name: string; value: string | undefined }[] {
  return args.map((arg, i) => {
    const eq = arg.indexOf("=");
    const value = arg.startsWith("--") && eq > 0 ? arg.slice(eq + 1) : args[i + 1];
    return { name: llamaFlagName(arg), value };
  });
}

export function logPrivacyWarnings(extraArgs: readonly string[]): string[] {
  const warnings: string[] = [];
  for (const { name, value } of flagsOf(extraArgs)) {
    if (VERBOSE.has(name) || (VERBOSITY.has(name) && Number(value) >= DEBUG_VERBOSITY))
      warnings.push(
        `llama.extra_args ${name}: llama-server logs prompts and replies at this verbosity, ${KEPT}`,
      );
    else if (OWN_FILES.has(name))
      warnings.push(
        `llama.extra_args ${name}: llama-server writes what it logs to ${value ?? "a file"} itself, ${KEPT}`,
      );
    else if (NO_PREFIX.has(name))
      warnings.push(
        `llama.extra_args ${name}: without llama-server's message prefix the core cannot tell where a model reply quoted in llama-server's log ends, so the rest of that launch's log is not kept`,
      );
  }
  return warnings;
}
