import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

afterEach(killFakes);

// A core that dies while writing a line (a panic, an OOM kill mid-write) leaves its last line
// without its newline: the client reads it as its stdout ends, just before the exit's report.
describe("a core that dies in the middle of a line", () => {
  test("fails the call it was answering with core_exited and the crash's stderr, not protocol_error", async () => {
    const child = new FakeChild((req, c) => {
      if (req.method !== "chat") return;
      c.stderr.write("thread 'main' panicked: out of memory\n");
      c.stdout.write(`{"id":"${req.id}","type":"event","event":"tok`);
      c.exit(134, null);
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const err = await rejection(client.chat({ input: "hi" }).result);
    expect(err.code).toBe("core_exited");
    expect(err.method).toBe("chat");
    expect((err.data as { stderr_tail: string[] }).stderr_tail).toContain(
      "thread 'main' panicked: out of memory",
    );
    // The cut line is still reported as one that was no message.
    expect(client.malformedLines).toBe(1);
  });

  test("one over maxLineBytes when it died is not blamed on maxLineBytes either", async () => {
    // Killed for its memory while writing a big answer (an embed's vectors): the client told the
    // host to raise maxLineBytes, for a line that was never whole.
    const child = new FakeChild((req, c) => {
      if (req.method !== "embed") return;
      c.stdout.write(`{"id":"${req.id}","type":"result","result":{"vectors":[[${"0.1,".repeat(400)}`);
      c.exit(null, "SIGKILL");
    });
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, maxLineBytes: 1024 }),
    );
    const err = await rejection(client.embed({ input: ["x"] }));
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("SIGKILL");
    expect(client.malformedLines).toBe(1);
  });

  test("a last line whole but for its newline is still its answer", async () => {
    const child = new FakeChild((req, c) => {
      if (req.method !== "echo") return;
      c.stdout.write(JSON.stringify({ id: req.id, type: "result", result: { ok: true } }));
      c.exit(0, null);
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    expect(await client.request("echo")).toEqual({ ok: true });
  });
});
