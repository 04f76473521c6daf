import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { HANDSHAKE_STRAY_LINES, readLine } from "../../src/client/wire-lines.ts";
import { FakeChild, type FakeRequest } from "./fake-child.ts";
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
        // A config named: a bare binary with none is warned of (core-launch.ts), not the point here.
        config: "config.yaml",
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

/** A client on a FakeChild that answers echo, and other requests as `broken` does. */
async function answeringBroken(broken: (req: FakeRequest, c: FakeChild) => void) {
  const child = new FakeChild((req, c) => {
    if (req.method === "echo") c.send({ id: req.id, type: "result", result: { ok: true } });
    else broken(req, c);
  });
  return { child, client: track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn })) };
}

/** How `call` stands once an echo asked after it is answered: the core's lines are read in order. */
async function standingAfterEcho(client: LocalAiClient, call: Promise<unknown>): Promise<string> {
  let outcome = "pending";
  call.then(
    () => (outcome = "resolved"),
    () => (outcome = "rejected"),
  );
  expect(await client.request("echo")).toEqual({ ok: true });
  await Promise.resolve();
  return outcome;
}

describe("a line that is not JSON but names its request", () => {
  test("fails that call with protocol_error, and cancels a stream, rather than leaving it waiting", async () => {
    // A result cut short (another writer's bytes in the middle of it): its answer is lost.
    const { child, client } = await answeringBroken((req, c) => {
      if (req.method === "hang" || req.method === "chat")
        c.stdout.write(`{"id":"${req.id}","type":"result","result":{"text":"a\u0000b"\n`);
    });
    const call = client.request("hang", {}, { timeoutMs: 0 });
    const chat = client.chat({ input: "hi" });
    expect(await standingAfterEcho(client, call)).toBe("rejected");
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

describe("a JSON line that is no protocol message but names its request", () => {
  test("fails that call with protocol_error: a JSON-RPC answer (a wrong binary) is no answer", async () => {
    const { client } = await answeringBroken((req, c) => {
      if (req.method === "hang") c.send({ jsonrpc: "2.0", id: req.id, result: {} });
    });
    const call = client.request("hang", {}, { timeoutMs: 0 });
    expect(await standingAfterEcho(client, call)).toBe("rejected");
    const err = await rejection(call);
    expect(err.code).toBe("protocol_error");
    expect(err.message).toContain("not a protocol message");
  });

  test("start() on a binary that answers initialize in JSON-RPC rejects with protocol_error", async () => {
    const child = new FakeChild();
    // Answers initialize as an MCP server would: waited out, it was a `timeout` a minute later.
    const spawn = () => {
      child.send = (msg) =>
        child.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: {} })}\n`);
      return child;
    };
    const err = await rejection(
      LocalAiClient.start({ binary: "local-ai", spawn: spawn as never, requestTimeoutMs: 0 }),
    );
    expect(err.code).toBe("protocol_error");
    expect(err.method).toBe("initialize");
  });

  test("start() on a program whose stdout is no protocol at all rejects at once, the program killed", async () => {
    // `yes`, or a script printing its usage and waiting: its lines were counted one by one (a
    // million a second on the host's main thread) until initialize timed out, a minute later.
    for (const [line, maxLineBytes] of [
      ["usage: yes [STRING]", undefined],
      ['{"hello":"world"}', undefined],
      [`banner ${"=".repeat(200)}`, 100],
    ] as const) {
      const child = new FakeChild();
      const spawn = () => {
        child.send = () => child.stdout.write(`${line}\n`.repeat(HANDSHAKE_STRAY_LINES + 1));
        return child;
      };
      const err = await rejection(
        LocalAiClient.start({ binary: "local-ai", spawn: spawn as never, requestTimeoutMs: 0, maxLineBytes }),
      );
      expect(err.code).toBe("protocol_error");
      expect(err.method).toBe("initialize");
      if (!maxLineBytes) expect(err.message).toContain(line);
      expect(child.signals).toContain("SIGKILL");
    }
  });

  test("start() through a launcher that prints a line or two before it execs the core succeeds", async () => {
    // `echo "starting local-ai"; exec local-ai "$@"`: its banner, taken for the answer to
    // initialize, failed a start that had always worked, and showed the host what it echoed.
    for (const [banner, times, maxLineBytes] of [
      ["starting local-ai with HF_TOKEN=hf_x", HANDSHAKE_STRAY_LINES, undefined],
      [`${"=".repeat(400)}\n{"hello":"world"}`, HANDSHAKE_STRAY_LINES / 2, 300],
    ] as const) {
      const child = new FakeChild();
      const send = child.send.bind(child);
      const spawn = () => {
        child.send = (msg) => {
          child.stdout.write(`${banner}\n`.repeat(times));
          send(msg);
        };
        return child;
      };
      const client = track(
        await LocalAiClient.start({ binary: "local-ai", spawn: spawn as never, maxLineBytes }),
      );
      expect(client.info.server.name).toBe("fake-child");
      expect(client.malformedLines).toBe(HANDSHAKE_STRAY_LINES);
    }
  });
});
