import { afterEach, describe, expect, test } from "bun:test";
import {
  CORE_STOP_MARGIN_MS,
  type ExitInfo,
  LocalAiClient,
  type LocalAiClientOptions,
} from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// A core that closes its stdout but runs on can never answer again (fake-child.ts `mute()`).
afterEach(killFakes);

type Exit = ExitInfo & { expected: boolean };

/** A client on a FakeChild that ignores end of input, as a core stuck stopping llama-server does. */
async function startIgnoringEof(extra: Partial<LocalAiClientOptions>) {
  const child = new FakeChild();
  child.exitOnEof = false;
  const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, ...extra }));
  return { child, client };
}

describe("a core whose stdout closes while it runs", () => {
  test("fails what was sent to it at once, is stopped by end of input, and restarts", async () => {
    const exits: Exit[] = [];
    const children: FakeChild[] = [];
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        restart: { initialDelayMs: 50 },
        onExit: (i) => exits.push(i),
        spawn: () => {
          const child = new FakeChild((req, c) => {
            if (req.method === "echo") c.send({ id: req.id, type: "result", result: req.params });
          });
          children.push(child);
          return child;
        },
      }),
    );
    const chat = client.chat({ input: "hang" });
    const pending = client.request("hang", {}, { timeoutMs: 0 });
    const started = Date.now();
    children[0]?.stderr.write("fake child: going mute\n");
    children[0]?.mute();
    const err = await rejection(pending);
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("closed its stdout");
    expect(err.data?.stderr_tail).toEqual(["fake child: going mute"]);
    expect((await rejection(chat.result)).code).toBe("core_exited");
    expect(Date.now() - started).toBeLessThan(2000);
    // Stopped the way the real core stops by itself: end of input.
    expect(children[0]?.stdinEnded).toBe(true);
    expect(await client.request("echo", { again: true })).toEqual({ again: true });
    expect(children).toHaveLength(2);
    expect(exits).toEqual([expect.objectContaining({ expected: false, code: 0, signal: null })]);
  });

  test("one that ignores end of input is killed after the stop grace; without restarts calls fail", async () => {
    const exits: Exit[] = [];
    const { child, client } = await startIgnoringEof({ stopGraceMs: 0, onExit: (i) => exits.push(i) });
    const pending = client.request("hang", {}, { timeoutMs: 0 });
    const started = Date.now();
    child.mute();
    expect((await rejection(pending)).code).toBe("core_exited");
    expect(client.running).toBe(false);
    expect((await rejection(client.ping())).code).toBe("core_exited");
    expect(child.signals).toEqual([]);
    // stopGraceMs + CORE_STOP_MARGIN_MS (7 s) after it was found mute.
    while (exits.length === 0 && Date.now() - started < 10_000) await Bun.sleep(50);
    expect(child.signals).toEqual(["SIGKILL"]);
    expect(exits).toEqual([expect.objectContaining({ expected: false, signal: "SIGKILL" })]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(CORE_STOP_MARGIN_MS);
  }, 20_000);

  test("a stop grace past what a timer holds is the longest wait, not a SIGKILL at once", async () => {
    const { child, client } = await startIgnoringEof({ stopGraceMs: 1e12 });
    child.mute();
    expect(await waitFor(() => child.stdinEnded, { timeoutMs: 5000 })).toBe(true);
    await Bun.sleep(200);
    // Killed at once, its llama-server (outside child mode) would have outlived it.
    expect(child.signals).toEqual([]);
    client.kill();
  });

  test("a shutdown() while it stops lets that stop finish: no SIGKILL before its own exit", async () => {
    const child = new FakeChild();
    child.eofExitDelayMs = 800;
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    child.mute();
    // The client sees the closed stdout (after 500 ms), then closes the core's stdin; it exits 800 ms later.
    expect(await waitFor(() => child.stdinEnded, { timeoutMs: 5000 })).toBe(true);
    expect(child.exited).toBe(false);
    await client.shutdown();
    expect(child.exited).toBe(true);
    expect(child.signals).toEqual([]);
  });
});

describe("a core whose stdin closes while it runs", () => {
  test("fails what was sent to it at once and is stopped, rather than leaving calls waiting", async () => {
    // Node reports the closed pipe as an EPIPE on the next write and then takes every later
    // write as unsendable: a chat (no time limit by default) written then waited for good.
    const child = new FakeChild();
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    child.stderr.write("fake child: closing stdin\n");
    child.closeInput();
    const started = Date.now();
    const err = await rejection(client.chat({ input: "hi" }).result);
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("closed its stdin");
    expect(err.data?.stderr_tail).toEqual(["fake child: closing stdin"]);
    expect((await rejection(client.chat({ input: "again" }).result)).code).toBe("core_exited");
    expect(Date.now() - started).toBeLessThan(2000);
    // It reads no end of input now: SIGTERM stops it as a shutdown would.
    expect(child.signals).toEqual(["SIGTERM"]);
  });
});

describe("a core found hung that then closes its stdout too", () => {
  test("is stopped once, and what calls are told stays why it was first stopped", async () => {
    const warnings: string[] = [];
    const { child, client } = await startIgnoringEof({
      requestTimeoutMs: 300,
      logger: { warn: (m) => warnings.push(m) },
    });
    child.reading = false;
    const chat = client.chat({ input: "x".repeat(1024 * 1024) }, { timeoutMs: 0 });
    expect((await rejection(chat.result)).message).toContain("read none of its input");
    // Its stdout closing as it stops was taken for a second failure: stopped again, and
    // calls told it had closed its stdout.
    child.mute();
    await Bun.sleep(700);
    expect(warnings.filter((w) => w.endsWith("stopping it"))).toHaveLength(1);
    expect((await rejection(client.ping())).message).toContain("read none of its input");
  });
});

describe("a core stopped for falling mute, once it has exited", () => {
  test("calls are still told why it was stopped, not only how it exited", async () => {
    // Its exit after the stop the client asked for replaced the reason: calls refused then said
    // only "exited with code 0", the reason the 87471a7 fix meant to keep.
    const exits: Exit[] = [];
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, onExit: (i) => exits.push(i) }),
    );
    child.mute();
    expect(await waitFor(() => exits.length > 0, { timeoutMs: 5000 })).toBe(true);
    const err = await rejection(client.ping());
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("closed its stdout");
  });
});
