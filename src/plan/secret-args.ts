import { llamaFlagName } from "./argv.ts";

/**
 * llama-server flags whose value is a secret: a key its HTTP API demands, and the Hugging Face
 * token it downloads with. Written in `llama.extra_args`, they go to llama-server as given, but
 * the plan report (`plan`, `doctor`'s plan checks, the protocol's `plan`) and the log file's start
 * line show them masked: those are pasted into issues and kept on disk, and the token is a
 * credential of the user's account.
 */
const SECRET_FLAGS = new Set(["--api-key", "--hf-token", "-hft", "--mcp-servers-json"]);

/**
 * A flag as llama-server reads it (`--api_key` is `--api-key`: argv.ts `llamaFlagName`).
 * `--mcp-servers-json` is inline MCP server definitions, whose headers and env carry their tokens.
 */
const isSecret = (flag: string): boolean => SECRET_FLAGS.has(llamaFlagName(flag));

export const MASKED = "***";

/** `args` as they may be shown: the value of each secret flag, separate or after `=`, masked. */
export function shownArgs(args: readonly string[]): string[] {
  return args.map((arg, i) => {
    const prev = args[i - 1];
    if (prev !== undefined && !prev.includes("=") && isSecret(prev)) return MASKED;
    const eq = arg.indexOf("=");
    return eq > 0 && isSecret(arg) ? `${arg.slice(0, eq)}=${MASKED}` : arg;
  });
}
