#!/usr/bin/env bun
import { runCli } from "./cli/run.ts";
import { logUnexpected } from "./util/logger.ts";

/** The entry point, and the only place that exits the process (src/cli/run.ts decides the code). */
// No top-level await: the compiled binary is CommonJS bytecode (see build.ts).
runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    logUnexpected("fatal", err);
    process.exit(1);
  },
);
