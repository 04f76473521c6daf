import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { readLine } from "../../src/client/wire-lines.ts";
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

describe("a line that is not JSON but names its request", () => {
  test("fails that call with protocol_error, and cancels a stream, rather than leaving it waiting", async () => {
    const child = new FakeChild((req, c) => {
      // A result cut short (another writer's bytes in the middle of it): its answer is lost.
      if (req.method === "hang" || req.method === "chat")
        c.stdout.write(`{"id":"${req.id}","type":"result","result":{"text":"a\u0000b"\n`);
      else if (req.method === "echo") c.send({ id: req.id, type: "result", result: { ok: true } });
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const call = client.request("hang", {}, { timeoutMs: 0 });
    const chat = client.chat({ input: "hi" });
    let outcome = "pending";
    call.then(
      () => (outcome = "resolved"),
      () => (outcome = "rejected"),
    );
    // The core's lines are read in order: once echo is answered, the broken line was read before it.
    expect(await client.request("echo")).toEqual({ ok: true });
    await Promise.resolve();
    expect(outcome).toBe("rejected");
    const err = await rejection(call);
    expect(err.code).toBe("protocol_error");
    expect(err.method).toBe("hang");
    expect(err.message).toContain("not JSON");
    expect((await rejection(chat.result)).code).toBe("protocol_error");
    // The chat still running on the core is cancelled, as for an answer over maxLineBytes.
    expect(child.requests.map((r) => r.method)).toContain("cancel");
    expect(client.malformedLines).toBe(2);
  });

  test("a line not JSON naming no pending call is only counted", async () => {
    const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: { ok: true } }));
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    child.stdout.write('{"id":"999","type":"result",\n');
    expect(await client.request("echo")).toEqual({ ok: true });
    expect(client.malformedLines).toBe(1);
  });
});

test("only the start of a line that is not JSON is searched for its id", () => {
  // Node's regexp overflowed its stack on a 10 MB line whose id string never closes: an uncaught
  // exception in the stdout listener. An id past the first 256 bytes is no id the core writes.
  const long = `{"id":"${"a".repeat(300)}","type":"result",`;
  expect(readLine(long)).toEqual(expect.objectContaining({ kind: "malformed", key: undefined }));
  expect(readLine('{"id":"7","type":"result",')).toEqual(expect.objectContaining({ key: "7" }));
});
