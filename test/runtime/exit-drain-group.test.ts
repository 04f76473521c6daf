import { expect, test } from "bun:test";
import { StateLines } from "../../src/runtime/child-state.ts";
import { type Exit, type Spawned, waitUntilHealthy } from "../../src/runtime/launch-steps.ts";
import { LogTail } from "../../src/runtime/log-sink.ts";

// A `llama.binary` wrapper whose shell exits (or is killed) while the llama-server it started
// still runs in its group (wrapper-tree.test.ts "a shell that exits on its own"): that server holds
// the output pipes, so the failed start's verdict waited out the whole drain wait (2 s) for them,
// the server loading on meanwhile, before the launch killed the group. A hand-made child: its pipes
// drain only once its group is killed, as a real group member's do.
test("a start whose shell exited, its group lingering: the group is killed before the pipes are waited for", async () => {
  let groupKilled = false;
  const drained = Promise.withResolvers<void>();
  const empty = new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const exited = Promise.resolve<Exit>({ code: 3, signal: null });
  const spawned: Spawned = {
    child: {
      pid: 2 ** 30, // no such process: /proc gives no fingerprint
      stdout: empty,
      stderr: empty,
      exited,
      politeSignal: true,
      group: true,
      groupLingers: () => !groupKilled,
      writeLine: () => false,
      terminate: () => {},
      kill: () => {
        groupKilled = true;
        drained.resolve();
      },
    },
    binary: "/nonexistent/llama-server",
    argv: [],
    port: 1,
    apiKey: "k".repeat(64),
    baseUrl: "http://127.0.0.1:1",
    t0: Date.now(),
    tail: new LogTail(),
    lastLine: Date.now(),
    drained: drained.promise,
    exit: undefined,
    exited: exited.then((e) => {
      spawned.exit = e;
      return e;
    }),
    states: new StateLines(),
  };
  await spawned.exited;
  const failure = await waitUntilHealthy(spawned, {
    startupTimeoutMs: 5000,
    intervalMs: 20,
    signal: new AbortController().signal,
    emit: () => {},
  });
  expect(failure?.error.data?.exit_code).toBe(3);
  expect(groupKilled).toBe(true);
});
