import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

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
