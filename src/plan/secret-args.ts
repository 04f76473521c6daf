import { SECRET_NAME } from "../util/arg-secrets.ts";
import { SECRET_FLAGS, URL_FLAGS } from "../util/llama-secret-flags.ts";
import { llamaFlagName } from "./argv.ts";

// llama-server's secret flags (util/llama-secret-flags.ts), written in `llama.extra_args`: the
// plan report (`plan`, `doctor`'s plan checks, the protocol's `plan`) and the log file's start
// line show them masked, as those are pasted into issues and kept on disk.

/**
 * The environment variable llama-server reads each secret flag from (common/arg.cpp `set_env`,
 * b10587). These go to the child there, not on its command line: `/proc/<pid>/cmdline` is readable
 * by every local user, and the pid record keeps argv on disk. A key of `--api-key` joins the
 * launch's own in `LLAMA_API_KEY`, which llama-server reads as a list and accepts beside the
 * flag's (transcripts/76b): the caller puts the launch's key first.
 */
const ENV_OF: Record<string, string> = {
  "--api-key": "LLAMA_API_KEY",
  "--hf-token": "HF_TOKEN",
  "-hft": "HF_TOKEN",
  "--mcp-servers-json": "LLAMA_ARG_MCP_SERVERS_JSON",
  "--model-url": "LLAMA_ARG_MODEL_URL",
  "-mu": "LLAMA_ARG_MODEL_URL",
  "--mmproj-url": "LLAMA_ARG_MMPROJ_URL",
  "-mmu": "LLAMA_ARG_MMPROJ_URL",
};

/** A flag as llama-server reads it (`--api_key` is `--api-key`: argv.ts `llamaFlagName`), `=value` cut. */
const nameOf = (arg: string): string => {
  const eq = arg.indexOf("=");
  return llamaFlagName(eq > 0 ? arg.slice(0, eq) : arg);
};

export const MASKED = "***";

/** A URL with its user:password and query masked; one that does not parse, masked whole. */
function shownUrl(value: string): string {
  if (!URL.canParse(value)) return MASKED;
  const url = new URL(value);
  if (url.username !== "" || url.password !== "") {
    url.username = MASKED;
    url.password = "";
  }
  if (url.search !== "") url.search = `?${MASKED}`;
  return url.toString();
}

/**
 * llama-server's own flags whose name holds a secret's word but whose value is none (common/arg.cpp,
 * b10587): a file's path, a count, or no value. Masked, the plan's own `--image-max-tokens 128`
 * read `***` in `plan`'s argv and the log's start line.
 */
const OWN_FLAGS: ReadonlySet<string> = new Set([
  "--api-key-file",
  "--ssl-key-file",
  "--image-min-tokens",
  "--image-max-tokens",
  "--mtmd-batch-max-tokens",
  "--print-token-count",
  "--cors-credentials",
  "--no-cors-credentials",
]);

/** Whether `a` and `b` differ by one letter added, dropped or changed. */
function oneEditApart(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1 || a === b) return false;
  let i = 0;
  while (a[i] === b[i]) i++;
  const rest = (x: string, skip: number) => x.slice(i + skip);
  return rest(a, 1) === rest(b, 1) || rest(a, 1) === rest(b, 0) || rest(a, 0) === rest(b, 1);
}

/**
 * Whether `name`, a flag llama-server does not know as a secret's, looks like one: a secret's
 * word in its name (`--api-keyy`, `--github_token`, any case), or one letter from a secret flag
 * (`--hf-tokn`). llama-server refuses an unknown flag, but the plan and the log's start line
 * showed its value first; a value masked that was none costs a `***` in a report.
 */
function looksSecret(name: string): boolean {
  if (!name.startsWith("-") || OWN_FLAGS.has(name)) return false;
  return SECRET_NAME.test(name) || [...SECRET_FLAGS].some((f) => f.startsWith("--") && oneEditApart(f, name));
}

/** How the value of `flag` may be shown, or undefined for a flag whose value is not masked. */
function shownValue(flag: string, value: string): string | undefined {
  const name = nameOf(flag);
  if (SECRET_FLAGS.has(name)) return MASKED;
  if (URL_FLAGS.has(name)) return shownUrl(value);
  // A flag after it is its own (`--secret-mode --ctx-size 4096`), not its value.
  if (looksSecret(name) && (flag.includes("=") || !value.startsWith("-"))) return MASKED;
  return undefined;
}

/** `args` as they may be shown: the value of each secret flag, separate or after `=`, masked. */
export function shownArgs(args: readonly string[]): string[] {
  return args.map((arg, i) => {
    const prev = args[i - 1];
    if (prev !== undefined && !prev.includes("=")) {
      const shown = shownValue(prev, arg);
      if (shown !== undefined) return shown;
    }
    const eq = arg.indexOf("=");
    if (eq <= 0) return arg;
    const shown = shownValue(arg, arg.slice(eq + 1));
    return shown === undefined ? arg : `${arg.slice(0, eq)}=${shown}`;
  });
}

/**
 * `args` split for a launch: the secret flags llama-server also reads from its environment taken
 * out, their values in `env` (the last one given wins, as on llama-server's command line).
 */
export function secretsByEnv(args: readonly string[]): { argv: string[]; env: Record<string, string> } {
  const argv: string[] = [];
  const env: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const name = ENV_OF[nameOf(arg)];
    const eq = arg.indexOf("=");
    if (name !== undefined && eq > 0) env[name] = arg.slice(eq + 1);
    else if (name !== undefined && i + 1 < args.length) env[name] = args[++i] as string;
    else argv.push(arg);
  }
  return { argv, env };
}

/** A URL's credentials: its user, password and query values; one that does not parse, whole. */
function urlParts(value: string): string[] {
  if (!URL.canParse(value)) return [value];
  const url = new URL(value);
  return [url.username, url.password, ...url.searchParams.values()];
}

/** The secret-named values of inline JSON (`--mcp-servers-json`'s headers and env), and a header's credential alone. */
function jsonSecrets(value: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  const found: string[] = [];
  const walk = (node: unknown): void => {
    if (node === null || typeof node !== "object") return;
    for (const [key, v] of Object.entries(node)) {
      if (typeof v === "string" && SECRET_NAME.test(key))
        found.push(v, ...(/^[A-Za-z]+\s+(\S+)$/.exec(v)?.slice(1) ?? []));
      else walk(v);
    }
  };
  walk(parsed);
  return found;
}

/**
 * The secrets that shownArgs masks in `args`, as llama-server may quote them in its log: each
 * value whole, a URL's user, password and query values, inline JSON's secret-named values.
 */
export function maskedSecrets(args: readonly string[]): string[] {
  const shown = shownArgs(args);
  return args.flatMap((arg, i) => {
    if (shown[i] === arg) return [];
    const joined = arg.startsWith("-") && arg.includes("=");
    const value = joined ? arg.slice(arg.indexOf("=") + 1) : arg;
    if (URL_FLAGS.has(nameOf(joined ? arg : (args[i - 1] ?? "")))) return urlParts(value);
    return [value, ...jsonSecrets(value)];
  });
}
