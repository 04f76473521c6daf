import { afterEach, describe, expect, jest, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// The core's answer to initialize is what a started client promises the host (`client.info`):
// a broken one resolved start() all the same, and the host's `client.info.capabilities` threw a
// TypeError of its own far from the cause.
afterEach(killFakes);

const GOOD = {
  protocol_version: 1,
  server: { name: "fake-child", version: "0.0.0" },
  capabilities: { methods: [], events: [] },
};

const BROKEN: [string, unknown][] = [
  ["null", null],
  ["a string", "ok"],
  ["no protocol_version", { capabilities: {} }],
  ["a version not asked for", { ...GOOD, protocol_version: 2 }],
  ["no capabilities", { protocol_version: 1 }],
  // Before: taken, and the host's `client.info.server.name` or `capabilities.methods.includes(…)`
  // (examples/node-host reads both) threw a TypeError of its own.
  ["no server", { protocol_version: 1, capabilities: GOOD.capabilities }],
  ["a server without a name", { ...GOOD, server: { version: "1.0.0" } }],
  ["methods that are no array", { ...GOOD, capabilities: { methods: "all", events: [] } }],
  ["no events", { ...GOOD, capabilities: { methods: [] } }],
];

describe("a broken answer to initialize", () => {
  for (const [what, result] of BROKEN) {
    test(`${what}: start() rejects with protocol_error and the core is killed`, async () => {
      const child = new FakeChild();
      child.initResult = result;
      const client = track(new LocalAiClient({ binary: "local-ai", spawn: child.spawn }));
      const err = await rejection(client.start());
      expect(err.code).toBe("protocol_error");
      expect(err.method).toBe("initialize");
      expect(child.signals).toContain("SIGKILL");
      expect(client.info).toBeUndefined();
    });
  }

  test("a version the host asked for is taken, and so is a well-formed answer's extra field", async () => {
    const child = new FakeChild();
    child.initResult = { ...GOOD, protocol_version: 2, extra: true };
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        initialize: { protocol_versions: [1, 2] },
      }),
    );
    expect(client.info?.protocol_version).toBe(2);
  });
});

describe("a core that never answers initialize", () => {
  for (const requestTimeoutMs of [0, Number.POSITIVE_INFINITY]) {
    test(`requestTimeoutMs ${requestTimeoutMs}: start() still rejects, within the default 60 s`, async () => {
      // "No limit" for the host's calls left the handshake unbounded too: a core wedged before
      // it read its input (a stuck disk) held start(), and the app's splash screen, for good.
      const child = new FakeChild();
      child.reading = false;
      const client = track(new LocalAiClient({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs }));
      jest.useFakeTimers();
      let outcome = "pending";
      try {
        client.start().then(
          () => (outcome = "started"),
          (err: { code?: string; method?: string }) => (outcome = `${err.code} ${err.method}`),
        );
        jest.advanceTimersByTime(60_000);
      } finally {
        jest.useRealTimers();
      }
      for (let turn = 0; turn < 10 && outcome === "pending"; turn++) await Promise.resolve();
      expect(outcome).toBe("timeout initialize");
      expect(child.signals).toContain("SIGKILL");
    });
  }
});
