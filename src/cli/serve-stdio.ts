import { fstatSync } from "node:fs";
import { defineCommand } from "citty";
import { killRunningProbes } from "../plan/run-probe.ts";
import { stdoutSink } from "../protocol/transport/writer.ts";
import { runStdioServer } from "../server/stdio-server.ts";
import { logger } from "../util/logger.ts";
import { configArg } from "./args.ts";
import { releaseStopSignals, STOP_SIGNALS } from "./early-signals.ts";

/** Said once on stderr when a person, not a host, is typing (stdin is a terminal). */
export const TTY_HINT =
  'serve-stdio speaks NDJSON: one JSON request per line on stdin, answers on stdout. Try {"id":1,"method":"ping"} and Enter; Ctrl-D ends (docs/protocol.md, README "A first chat").';

export default defineCommand({
  meta: { name: "serve-stdio", description: "Serve the NDJSON protocol on stdin/stdout" },
  args: { ...configArg },
  setup: () => {
    if (process.stdin.isTTY) logger.info(TTY_HINT);
  },
  run: async ({ args }) => {
    const problem = stdinProblem();
    if (problem) {
      logger.error(problem);
      return 1;
    }
    try {
      return await serve(args.config);
    } finally {
      // A probe no plan waits for any more (a cancelled pull's fit check, initialize's read-ahead)
      // was left to its timeout, which dies with the core: a hung --list-devices outlived it.
      killRunningProbes();
    }
  },
});

/**
 * Why stdin can carry no requests, or null. A directory (`serve-stdio < somedir`) fails the
 * stream's first read (EISDIR), which ended the core with a stack trace naming neither stdin
 * nor the fix. A stdin that cannot be looked at is left to the stream, as before.
 */
function stdinProblem(): string | null {
  try {
    if (!fstatSync(0).isDirectory()) return null;
  } catch {
    return null;
  }
  return "stdin is a directory: serve-stdio reads NDJSON requests from a pipe or a file";
}

function serve(configPath: string) {
  return runStdioServer({
    configPath,
    cwd: process.cwd(),
    input: Bun.stdin.stream(),
    sink: stdoutSink(),
    testMethods: process.env.LOCAL_AI_TEST_METHODS === "1",
    onFault: (handler) => {
      const rejected = (reason: unknown) => handler(reason, false);
      const thrown = (err: unknown) => handler(err, true);
      process.on("unhandledRejection", rejected);
      process.on("uncaughtException", thrown);
      return () => {
        process.off("unhandledRejection", rejected);
        process.off("uncaughtException", thrown);
      };
    },
    onSignal: stopSignals,
  });
}

/**
 * The stop signals, heard by `handler` from now on; one that came while the core was loading
 * (early-signals.ts) is handed over at once, so the loop stops as for one sent now.
 */
export function stopSignals(handler: (signal: string) => void): () => void {
  const listeners = STOP_SIGNALS.map((s) => {
    const l = () => handler(s);
    process.on(s, l);
    return [s, l] as const;
  });
  const early = releaseStopSignals();
  if (early) handler(early);
  return () => {
    for (const [s, l] of listeners) process.off(s, l);
  };
}
