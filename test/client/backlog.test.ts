import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// A core that stops reading its stdin (hung, or stopped by a debugger): fake-child.ts `reading`.
afterEach(killFakes);

const MiB = 1024 * 1024;

describe("a core that stops reading its input", () => {
  test("past 64 MiB queued, new requests are refused at once with core_backlog", async () => {
    const child = new FakeChild();
    // requestTimeoutMs 0: no stall detection, so only the bound stops the queue.
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", requestTimeoutMs: 0, spawn: child.spawn }),
    );
    child.reading = false;
    const big = "x".repeat(MiB);
    const codes: string[] = [];
    for (let i = 0; i < 80; i++) {
      codes.push((await rejection(client.request("embed", { input: [big] }, { timeoutMs: 1 }))).code);
    }
    expect(codes.slice(0, 64)).toEqual(Array(64).fill("timeout"));
    expect(codes.slice(64)).toEqual(Array(16).fill("core_backlog"));
    expect(child.stdin.writableLength).toBeLessThan(66 * MiB);
    const err = await rejection(client.ping());
    expect(err.code).toBe("core_backlog");
    expect(err.data).toEqual({ queued_bytes: child.stdin.writableLength, limit_bytes: 64 * MiB });
  });

  test("a core whose input stays undrained for the request time limit is taken for hung", async () => {
    const warnings: string[] = [];
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        requestTimeoutMs: 300,
        logger: { warn: (m) => warnings.push(m) },
        spawn: child.spawn,
      }),
    );
    child.reading = false;
    const chat = client.chat({ input: "x".repeat(MiB) }, { timeoutMs: 0 });
    const started = Date.now();
    const err = await rejection(chat.result);
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("read none of its input for 300 ms");
    expect(Date.now() - started).toBeLessThan(2000);
    expect(client.running).toBe(false);
    // It is stopped as a shutdown would stop it: SIGTERM, and SIGKILL only after the stop grace.
    expect(child.signals).toEqual(["SIGTERM"]);
    expect(warnings.some((w) => w.includes("taken for hung; stopping it"))).toBe(true);
  });

  test("a core that reads its input slowly, but reads, is not taken for hung", async () => {
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", requestTimeoutMs: 500, spawn: child.spawn }),
    );
    child.readDelayMs = 40;
    const line = "x".repeat(100 * 1024);
    // 30 lines read 40 ms apart: stdin stays full for over a second, twice the limit and more.
    const calls = Array.from({ length: 30 }, () =>
      rejection(client.request("embed", { input: [line] }, { timeoutMs: 0 })),
    );
    expect(await waitFor(() => child.bytesRead >= 30 * line.length, { timeoutMs: 15_000 })).toBe(true);
    expect(child.signals).toEqual([]);
    expect(client.running).toBe(true);
    void calls;
  });

  test("requestTimeoutMs Infinity (no limit) checks no stall, rather than one that fires at once", async () => {
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        requestTimeoutMs: Number.POSITIVE_INFINITY,
        spawn: child.spawn,
      }),
    );
    child.reading = false;
    const chat = client.chat({ input: "x".repeat(MiB) }, { timeoutMs: 0 });
    chat.result.catch(() => {});
    // A timer of Infinity fires after 1 ms: the core was taken for hung and stopped at once.
    await Bun.sleep(300);
    expect(child.signals).toEqual([]);
    expect(client.running).toBe(true);
    child.reading = true;
  });
});
