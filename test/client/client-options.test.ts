import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient, type LocalAiClientOptions } from "../../src/client/index.ts";
import { Restarts, restartOptions } from "../../src/client/restarts.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// The options a host creates the client with, filled from its own settings: checked as strictly
// as a call's (call-options.test.ts).
afterEach(killFakes);

/** A FakeChild that answers every request; how many were spawned. */
function core() {
  const spawned: FakeChild[] = [];
  const spawn = () => {
    const child = new FakeChild();
    spawned.push(child);
    return child;
  };
  return { spawned, spawn };
}

const BAD: [string, Partial<LocalAiClientOptions>, string][] = [
  // Before: the default, 60 s, without a word.
  ["requestTimeoutMs", { requestTimeoutMs: "30000" as never }, "a string"],
  // Before: coerced by setTimeout.
  ["streamTimeoutMs", { streamTimeoutMs: "1000" as never }, "a string"],
  // Before: no limit at all.
  ["requestTimeoutMs", { requestTimeoutMs: -1 }, "-1"],
  ["streamTimeoutMs", { streamTimeoutMs: -5000 }, "-5000"],
  // Before: every event, every line from the core dropped.
  ["maxBufferedEvents", { maxBufferedEvents: -1 }, "-1"],
  ["maxLineBytes", { maxLineBytes: -1 }, "-1"],
  ["maxLineBytes", { maxLineBytes: 0 }, "0"],
  ["stderrTailLines", { stderrTailLines: "50" as never }, "a string"],
  ["stopGraceMs", { stopGraceMs: -3000 }, "-3000"],
  ["restart", { restart: "yes" as never }, "a string"],
  // Before: a negative delay restarted at once.
  ["restart.initialDelayMs", { restart: { initialDelayMs: -500 } }, "-500"],
  ["restart.maxDelayMs", { restart: { maxDelayMs: "10s" as never } }, "a string"],
  ["restart.maxRestarts", { restart: { maxRestarts: -1 } }, "-1"],
  // Before: every exit reset the count, so a core crashing after its handshake restarted forever.
  ["restart.resetAfterMs", { restart: { resetAfterMs: 0 } }, "0"],
  // Before: accepted, and as good as 0: the handshake alone outlasts a millisecond.
  ["restart.resetAfterMs", { restart: { resetAfterMs: 1 } }, "1"],
  ["restart.resetAfterMs", { restart: { resetAfterMs: 999 } }, "999"],
  ["restart.resetAfterMs", { restart: { resetAfterMs: Number.NEGATIVE_INFINITY } }, "-Infinity"],
];

describe("a client option of a wrong type or out of range", () => {
  for (const [field, given, shown] of BAD) {
    test(`${field} ${shown}: start() rejects with invalid_request naming it, no core spawned`, async () => {
      const { spawned, spawn } = core();
      const err = await rejection(LocalAiClient.start({ binary: "local-ai", spawn, ...given }));
      expect(err.code).toBe("invalid_request");
      expect(err.message).toContain(field);
      expect(err.message).toContain(shown);
      expect(err.data).toEqual({ field });
      expect(spawned).toHaveLength(0);
    });
  }

  test("the client made with it never spawns: start() again and its calls fail the same way", async () => {
    const { spawned, spawn } = core();
    const client = track(new LocalAiClient({ binary: "local-ai", spawn, requestTimeoutMs: -1 }));
    expect((await rejection(client.start())).code).toBe("invalid_request");
    expect((await rejection(client.start())).code).toBe("invalid_request");
    const err = await rejection(client.ping());
    expect(err.code).toBe("invalid_request");
    expect(err.method).toBe("ping");
    expect(spawned).toHaveLength(0);
  });
});

describe("client options within range", () => {
  test("0, Infinity, NaN and null start the core", async () => {
    const { spawned, spawn } = core();
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        requestTimeoutMs: 0,
        streamTimeoutMs: Number.POSITIVE_INFINITY,
        maxBufferedEvents: 0,
        maxLineBytes: Number.NaN,
        stderrTailLines: null as never,
        stopGraceMs: Number.POSITIVE_INFINITY,
        restart: { maxRestarts: Number.POSITIVE_INFINITY, initialDelayMs: 0, resetAfterMs: Number.NaN },
      }),
    );
    expect(client.running).toBe(true);
    expect(spawned).toHaveLength(1);
  });

  test("restart.resetAfterMs of 1000 and Infinity (never reset) start the core", async () => {
    for (const resetAfterMs of [1000, Number.POSITIVE_INFINITY]) {
      const { spawned, spawn } = core();
      const client = track(
        await LocalAiClient.start({ binary: "local-ai", spawn, restart: { resetAfterMs } }),
      );
      expect(client.running).toBe(true);
      expect(spawned).toHaveLength(1);
    }
  });

  test("restart delays of Infinity are the longest a timer holds, never an immediate restart", () => {
    const delays = (initialDelayMs: number, maxDelayMs: number) => {
      const restarts = new Restarts(restartOptions({ initialDelayMs, maxDelayMs, maxRestarts: 3 }));
      return [restarts.next().delayMs, restarts.next().delayMs];
    };
    const inf = Number.POSITIVE_INFINITY;
    expect(delays(inf, inf)).toEqual([2 ** 31 - 1, 2 ** 31 - 1]);
    expect(delays(500, inf)).toEqual([500, 1000]);
    expect(delays(inf, 10_000)).toEqual([10_000, 10_000]);
  });
});
