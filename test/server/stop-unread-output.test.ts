import { describe, expect, test } from "bun:test";
import type { Sink } from "../../src/protocol/transport/writer.ts";
import { runStdioServer } from "../../src/server/stdio-server.ts";
import { waitFor } from "../fixtures/wait.ts";

// A host that reads none of the core's output (frozen, or gone without closing its end) must not
// keep a signal or a shutdown from stopping the core: what waits to be written gets the bounded
// drain (docs/protocol.md "Drain on exit"), then the core exits. Through the compiled binary, the
// stop used to wait for every answer to be written, so SIGTERM left the core and its
// llama-servers running for as long as the host read nothing.

/** The loop over a sink that takes one batch and then never another, like a pipe nobody reads. */
function unreadCore() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const input = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  let batches = 0;
  const sink: Sink = {
    write: () => {
      batches++;
      return new Promise<void>(() => {});
    },
  };
  let onSignal: (s: string) => void = () => {};
  const exit = runStdioServer({
    configPath: "config.yaml",
    cwd: "/nonexistent-local-ai-test",
    input,
    sink,
    testMethods: true,
    onSignal: (h) => {
      onSignal = h;
      return () => {};
    },
  });
  const send = (text: string) => controller.enqueue(new TextEncoder().encode(text));
  return { exit, send, signal: (s: string) => onSignal(s), batches: () => batches };
}

/** Resolves with the exit code, or "hung" after `ms`. */
const within = (p: Promise<number>, ms: number) =>
  Promise.race([p, Bun.sleep(ms).then(() => "hung" as const)]);

describe("a stop while the host reads no output", () => {
  test("SIGTERM with thousands of answers waiting for room: the core exits after the drain's limit", async () => {
    const core = unreadCore();
    core.send('{"id":"s","method":"test.sleep","params":{"ms":60000}}\n');
    // A batch taken, the queue full, a queue's worth waiting for room: reading pauses (docs/protocol.md).
    core.send(Array.from({ length: 5000 }, (_, i) => `{"id":${i},"method":"ping"}\n`).join(""));
    await Bun.sleep(300);
    // The first batch, however late a loaded machine takes it; the sink never takes another.
    expect(await waitFor(() => core.batches() > 0)).toBe(true);
    expect(core.batches()).toBe(1);
    const t0 = performance.now();
    core.signal("SIGTERM");
    expect(await within(core.exit, 8000)).toBe(0);
    // The default drain limit (2 s), not an unbounded wait.
    expect(performance.now() - t0).toBeLessThan(6000);
  }, 15_000);

  test("a shutdown read behind answers waiting for room: the core exits after the drain's limit", async () => {
    const core = unreadCore();
    core.send('{"id":"s","method":"test.sleep","params":{"ms":60000}}\n');
    // One batch taken, the queue full behind it and some answers waiting: reading goes on.
    core.send(Array.from({ length: 2500 }, (_, i) => `{"id":${i},"method":"ping"}\n`).join(""));
    await Bun.sleep(300);
    core.send('{"id":"sd","method":"shutdown"}\n');
    expect(await within(core.exit, 8000)).toBe(0);
  }, 15_000);
});
