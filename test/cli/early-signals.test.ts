import { expect, test } from "bun:test";
import { join } from "node:path";
import { holdStopSignals, releaseStopSignals } from "../../src/cli/early-signals.ts";
import { stopSignals } from "../../src/cli/serve-stdio.ts";
import { REPO } from "../fixtures/core-process.ts";

// docs/protocol.md#lifecycle: a SIGTERM that comes while the core's modules load (its first
// ~50 ms) stops it as one sent later does, exit 0; a line the loop had not read by the time the
// stop completed gets no answer (the stop is quick before any work). Without the hold Bun's
// default ended it with 143.
test.skipIf(process.platform === "win32")(
  "a stop signal that came while the core loaded is handed to the stdio loop once it listens",
  () => {
    const before = process.listenerCount("SIGTERM");
    holdStopSignals();
    expect(process.listenerCount("SIGTERM")).toBe(before + 1);
    process.emit("SIGTERM" as never);
    process.emit("SIGINT" as never); // the first is the one kept
    const heard: string[] = [];
    const off = stopSignals((s) => heard.push(s));
    try {
      expect(heard).toEqual(["SIGTERM"]);
      // The hold's listeners are gone; the loop's own hear the next.
      process.emit("SIGHUP" as never);
      expect(heard).toEqual(["SIGTERM", "SIGHUP"]);
      expect(process.listenerCount("SIGTERM")).toBe(before + 1);
    } finally {
      off();
    }
    expect(process.listenerCount("SIGTERM")).toBe(before);
    expect(releaseStopSignals()).toBeUndefined();
  },
);

test("no signal while loading: the loop is handed none", () => {
  holdStopSignals();
  const heard: string[] = [];
  const off = stopSignals((s) => heard.push(s));
  off();
  expect(heard).toEqual([]);
});

// The hold's wiring, not only its parts: src/index.ts imports early-signals.ts before the CLI's
// modules, and the entry's argv names serve-stdio there. A SIGTERM sent as run.ts loads (the
// fixture) stops the real core as one sent later does; without the hold, or with its import
// after the others, Bun's default ended it with 143.
test.skipIf(process.platform === "win32")(
  "a real SIGTERM while the entry's modules load: serve-stdio stops in order, exit 0",
  async () => {
    const proc = Bun.spawn(
      [
        process.execPath,
        "--preload",
        join(REPO, "test/fixtures/signal-at-cli-load.ts"),
        join(REPO, "src/index.ts"),
        "serve-stdio",
      ],
      {
        cwd: REPO,
        stdin: "pipe", // held open: the stop is the signal's, not the end of input's
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, LOCAL_AI_LOG_LEVEL: "debug" },
      },
    );
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(stderr).toContain("stopping: signal SIGTERM");
    expect(code).toBe(0);
  },
);
