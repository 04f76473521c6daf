import { afterEach, expect, jest, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

afterEach(killFakes);

for (const options of [undefined, {}, null]) {
  test(`a cancel of another's request, never answered, ends with requestTimeoutMs 0 (options ${JSON.stringify(options)})`, async () => {
    // requestTimeoutMs 0 is "no limit for my calls"; a cancel is the client's own way out and
    // is bounded whatever options object (or none, or null from a settings file) came with it.
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 0 }),
    );
    const outcomes: string[] = [];
    jest.useFakeTimers();
    try {
      client.cancel("someone-else", options as never).then(
        (v) => outcomes.push(`ok ${v}`),
        (e: Error) => outcomes.push(`error ${e.message}`),
      );
      for (let turn = 0; turn < 20; turn++) await new Promise((r) => process.nextTick(r));
      expect(child.requests.map((r) => r.method)).toEqual(["cancel"]);
      for (let s = 0; s < 70 && outcomes.length === 0; s++) {
        jest.advanceTimersByTime(1000);
        for (let turn = 0; turn < 20; turn++) await new Promise((r) => process.nextTick(r));
      }
    } finally {
      jest.useRealTimers();
    }
    expect(outcomes).toHaveLength(1);
  });
}

test("a cancel of another's request whose timeoutMs is text is refused, as every call's is", async () => {
  // A "5000" from a settings file: checkCallOptions refuses it (it silently took the default);
  // cancelOptions replaced it with the bound, so this one cancel sent with 60 s, unlike a cancel
  // of the client's own call, which rejects.
  const child = new FakeChild();
  const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
  const err = await client.cancel("someone-else", { timeoutMs: "5000" } as never).then(
    () => null,
    (e: Error & { code?: string }) => e,
  );
  expect(err?.code).toBe("invalid_request");
  expect(err?.message).toContain("timeoutMs must be a number");
  expect(child.requests.map((r) => r.method)).toEqual([]);
});
