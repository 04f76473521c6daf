import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// Lines a broken core may write that are JSON, and so reach the client's routing.
afterEach(killFakes);

describe("hostile lines from the core", () => {
  test("an error for no request whose code or message has no string form is only logged", async () => {
    const warnings: string[] = [];
    const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: { ok: true } }));
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        logger: { warn: (m) => warnings.push(m) },
      }),
    );
    // String() of {"toString":1} throws a TypeError: thrown in the stdout listener, it was an
    // uncaught exception in the host's process (an Electron main process dies of one).
    child.send({ id: null, type: "error", code: { toString: 1 }, message: { valueOf: 1, toString: 1 } });
    expect(await client.request("echo")).toEqual({ ok: true });
    expect(warnings.some((w) => w.includes('core reported an error for no request: {"toString":1}'))).toBe(
      true,
    );
  });
});

describe("a broken answer to cancel", () => {
  test("a null or non-boolean result rejects cancel(id) with protocol_error, not a TypeError", async () => {
    const warnings: string[] = [];
    const answers: unknown[] = [null, { cancelled: "yes" }];
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: answers.shift() });
    });
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        logger: { warn: (m) => warnings.push(m) },
      }),
    );
    // Reading `.cancelled` of null threw a TypeError: no LocalAiError, no code for the host.
    for (const shown of ["null", '{"cancelled":"yes"}']) {
      const err = await rejection(client.cancel("7"));
      expect(err.code).toBe("protocol_error");
      expect(err.method).toBe("cancel");
      expect(err.message).toContain(shown);
    }
    expect(client.malformedLines).toBe(2);
    expect(warnings).toHaveLength(2);
  });
});
