#!/usr/bin/env bun
// First: serve-stdio's stop signals are held from here on, not lost to the default while the rest loads.
import "./cli/early-signals.ts";
import { flushedForExit } from "./cli/output.ts";
import { runCli } from "./cli/run.ts";
import { logUnexpected } from "./util/logger.ts";

/** The entry point, and the only place that exits the process (src/cli/run.ts decides the code). */
// No top-level await: the compiled binary is CommonJS bytecode (see build.ts).
const argv = process.argv.slice(2);
runCli(argv).then(
  async (code) => {
    // A command's output reaches its reader before the exit (Bun's exit drops what is queued).
    // serve-stdio drains its own, within stdio.drain_timeout_ms: a host reading nothing must not hold it.
    // Stopped by a signal, it waits a bounded while: a reader that reads nothing must not keep it alive.
    if (argv[0] !== "serve-stdio") await flushedForExit(process.stdout, code);
    process.exit(code);
  },
  (err) => {
    logUnexpected("fatal", err);
    process.exit(1);
  },
);
