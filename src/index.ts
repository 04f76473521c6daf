#!/usr/bin/env bun
import { type CommandDef, runCommand, showUsage } from "citty";
import { main } from "./cli/main.ts";
import { isCoreError } from "./protocol/errors.ts";
import { logger, logUnexpected } from "./util/logger.ts";
import { VERSION } from "./version.ts";

/**
 * The entry point, and the only place that exits the process. Commands return their exit
 * code; a CoreError becomes a one-line message and exit 1, anything else a logged trace.
 */
async function entry(argv: string[]): Promise<number> {
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const index = argv.findIndex((a) => !a.startsWith("-"));
  const name = index === -1 ? undefined : argv[index];
  const sub = name === undefined ? undefined : await loadSubCommand(name);
  if (argv.includes("--help") || argv.includes("-h")) {
    await showUsage(sub ?? main, sub ? main : undefined);
    return 0;
  }
  if (!sub) {
    if (name !== undefined) logger.error(`unknown command '${name}'`);
    await showUsage(main);
    return 2;
  }
  try {
    // citty does not hand a subcommand's return value back, so the entry runs it directly.
    const { result } = await runCommand(sub, { rawArgs: argv.slice(index + 1) });
    return typeof result === "number" ? result : 0;
  } catch (err) {
    if (isCoreError(err)) {
      logger.error(`${err.code}: ${err.message}`);
      return 1;
    }
    if (err instanceof Error && err.name === "CLIError") {
      logger.error(err.message);
      await showUsage(sub, main);
      return 2;
    }
    logUnexpected("fatal", err);
    return 1;
  }
}

async function loadSubCommand(name: string): Promise<CommandDef | undefined> {
  const loaders = main.subCommands as Record<string, () => Promise<CommandDef>>;
  return Object.hasOwn(loaders, name) ? loaders[name]!() : undefined;
}

// No top-level await: the compiled binary is CommonJS bytecode (see build.ts).
entry(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    logUnexpected("fatal", err);
    process.exit(1);
  },
);
