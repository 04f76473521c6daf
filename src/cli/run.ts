import { type ArgsDef, type CommandDef, parseArgs, runCommand } from "citty";
import { killRunningProbes } from "../plan/run-probe.ts";
import { envLevelProblem, logger } from "../util/logger.ts";
import { terminalJson } from "../util/terminal-text.ts";
import { VERSION } from "../version.ts";
import { argsProblem } from "./check-args.ts";
import { reportFailure } from "./failure.ts";
import { main } from "./main.ts";
import { isUnwritten, SIGNAL_EXIT, writeDocument, writeUsage } from "./output.ts";

/**
 * An option as a usage error names it: without its `=value` (`--hf-token=hf_…`), which may be a
 * credential, as check-args.ts names one after the command.
 */
const optionName = (arg: string): string => (arg.includes("=") ? arg.slice(0, arg.indexOf("=")) : arg);

/**
 * The command line, from argv to an exit code: 0 done, 1 the command failed, 2 the command
 * line itself is wrong (usage on stderr, nothing on stdout). Commands return their exit code; a
 * CoreError becomes a one-line message (and, under `--json`, a JSON error object on stdout so a
 * script always has something to parse), anything else a logged trace.
 */
export async function runCli(argv: string[]): Promise<number> {
  const levelProblem = envLevelProblem();
  if (levelProblem) logger.warn(levelProblem);
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
    return printed(() => writeDocument(`${VERSION}\n`));
  }
  if (argv.includes("--help") || argv.includes("-h")) {
    const first = argv.find((a) => a !== "--help" && a !== "-h");
    // An option before the command is refused as without --help: its value is no command.
    if (first?.startsWith("-")) {
      logger.error(`unknown option '${optionName(first)}' (options go after the command)`);
      await writeUsage(process.stderr, main);
      return 2;
    }
    const sub = first === undefined ? undefined : await loadSubCommand(first);
    // `pul --help` is a typo to say, not the main usage and exit 0 (a script's check passes).
    if (first !== undefined && !sub) {
      logger.error(`unknown command '${first}'`);
      await writeUsage(process.stderr, main);
      return 2;
    }
    return printed(() => writeUsage(process.stdout, sub ?? main, sub ? main : undefined));
  }
  const [name, ...rest] = argv;
  const sub = name === undefined || name.startsWith("-") ? undefined : await loadSubCommand(name);
  if (!sub) {
    if (name?.startsWith("-"))
      logger.error(`unknown option '${optionName(name)}' (options go after the command)`);
    else if (name !== undefined) logger.error(`unknown command '${name}'`);
    await writeUsage(process.stderr, main);
    return 2;
  }
  const def = ((await resolve(sub.args)) ?? {}) as ArgsDef;
  const problem = argsProblem(rest, def);
  if (problem) {
    logger.error(problem);
    await writeUsage(process.stderr, sub, main);
    return 2;
  }
  let json = false;
  try {
    // Inside the try: citty's parse throws its usage errors (a missing positional) here too.
    json = "json" in def && parseArgs(rest, def).json === true;
    // citty does not hand a subcommand's return value back, so the entry runs it directly.
    const running = runCommand(sub, { rawArgs: rest }).then(({ result }) =>
      typeof result === "number" ? result : 0,
    );
    return OWN_SIGNALS.has(name!) ? await running : await untilSignal(running);
  } catch (err) {
    if (err instanceof Error && err.name === "CLIError") {
      logger.error(err.message);
      await writeUsage(process.stderr, sub, main);
      return 2;
    }
    return failed(err, name!, json);
  }
}

/** The commands that answer SIGINT and SIGTERM themselves (a clean shutdown, a kept partial). */
const OWN_SIGNALS = new Set(["serve-stdio", "pull"]);

/**
 * The command's exit code, or 128 + the signal's number when SIGINT or SIGTERM comes first: its
 * probes (llama-server --version, --list-devices, nvidia-smi) are killed before the exit, since
 * a signal sent to this process alone (a script's `kill`, `timeout`) does not reach them.
 */
async function untilSignal(command: Promise<number>): Promise<number> {
  const signals = SIGNAL_EXIT;
  let stop = () => {};
  const stopped = new Promise<number>((resolve) => {
    const on = (signal: keyof typeof signals) => () => {
      killRunningProbes();
      resolve(signals[signal]);
    };
    const int = on("SIGINT");
    const term = on("SIGTERM");
    process.once("SIGINT", int);
    process.once("SIGTERM", term);
    stop = () => {
      process.off("SIGINT", int);
      process.off("SIGTERM", term);
    };
  });
  try {
    return await Promise.race([command, stopped]);
  } finally {
    stop();
  }
}

function failed(err: unknown, command: string, json: boolean): number {
  const error = reportFailure(err, command);
  if (!json || isUnwritten(err)) return 1;
  try {
    writeDocument(`${terminalJson({ error }, 2)}\n`);
  } catch (unwritten) {
    reportFailure(unwritten, command); // the script read nothing: stderr says so beside the error
  }
  return 1;
}

/** `--version` or `--help` on stdout: 0 once written, else 1 with why on stderr (a full disk). */
async function printed(write: () => void | Promise<void>): Promise<number> {
  try {
    await write();
    return 0;
  } catch (err) {
    reportFailure(err, "local-ai");
    return 1;
  }
}

async function loadSubCommand(name: string): Promise<CommandDef | undefined> {
  const loaders = main.subCommands as Record<string, () => Promise<CommandDef>>;
  return Object.hasOwn(loaders, name) ? loaders[name]!() : undefined;
}

async function resolve<T>(
  value: T | (() => T | Promise<T>) | Promise<T> | undefined,
): Promise<T | undefined> {
  return typeof value === "function" ? (value as () => T | Promise<T>)() : value;
}
