import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// The call options a host hands each call (`{ timeoutMs, signal }`), given oddly.
afterEach(killFakes);

/** A client on a FakeChild that answers every request but chat and `never` with `{ status: "ok" }`. */
async function start() {
  const child = new FakeChild((req, c) => {
    if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    else if (req.method !== "chat" && req.method !== "never")
      c.send({ id: req.id, type: "result", result: { status: "ok" } });
  });
  const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
  return { client, child };
}

describe("a negative timeoutMs (a deadline already past)", () => {
  test("times the call out at once, unsent, rather than leaving it without a limit", async () => {
    // `timeoutMs: deadline - Date.now()` computed late was taken for "no limit": a call the core
    // never answered, and any chat, waited for good.
    const { client, child } = await start();
    const calls = [
      client.request("never", {}, { timeoutMs: -1 }),
      client.chat({ input: "hi" }, { timeoutMs: -250 }).result,
      client.embed({ input: "x" }, { timeoutMs: Number.NEGATIVE_INFINITY }),
      client.sessions.delete({ session_id: "s1" }, { timeoutMs: -5 }),
    ];
    for (const call of calls) {
      const err = await rejection(call);
      expect(err.code).toBe("timeout");
      expect(err.message).toContain("deadline had passed before it was sent");
    }
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(child.requests.map((r) => r.method)).toEqual(["ping"]);
  }, 5000);
});

describe("a cancel whose own wait is over before it begins", () => {
  test("is still sent, so the core stops the work; the caller hears the refusal", async () => {
    // Refused unsent like any call, the cancel left the core generating for no one.
    const { client, child } = await start();
    const chat = client.chat({ input: "hi" });
    expect(await waitFor(() => child.requests.some((r) => r.method === "chat"), { intervalMs: 2 })).toBe(
      true,
    );
    expect((await rejection(client.cancel(chat.id, { timeoutMs: -1 }))).code).toBe("timeout");
    expect((await rejection(client.cancel(chat.id, { signal: AbortSignal.abort() }))).code).toBe("cancelled");
    const cancels = () => child.requests.filter((r) => r.method === "cancel");
    expect(await waitFor(() => cancels().length === 2, { intervalMs: 2 })).toBe(true);
    expect(cancels().map((r) => r.params)).toEqual([{ request_id: chat.id }, { request_id: chat.id }]);
  });
});

describe("null as a call's options (a plain-JS host's 'none')", () => {
  test("is no options: the calls run, none throws", async () => {
    // Each threw a TypeError out of the call itself (reading `.signal` of null), not a rejection.
    const { client, child } = await start();
    const none = null as never;
    expect(await client.ping(none)).toEqual({ status: "ok" });
    expect(await client.sessions.list({}, none)).toEqual({ status: "ok" } as never);
    expect(await client.stream("echo", {}, none).result).toEqual({ status: "ok" });
    expect(await client.embed({ input: "x" }, none)).toEqual({ status: "ok" } as never);
    expect(await client.plan({}, none)).toEqual({ status: "ok" } as never);
    const chat = client.chat({ input: "hi" }, none);
    expect(await waitFor(() => child.requests.some((r) => r.method === "chat"), { intervalMs: 2 })).toBe(
      true,
    );
    expect(await client.cancel(chat.id, none)).toBe(true);
  });

  test("shutdown(null) and close(null) stop the core gracefully, not by a kill", async () => {
    // shutdown(null) rejected with a TypeError before it stopped anything, and close(null) then
    // killed the core outright, leaving llama-server running.
    for (const stop of ["shutdown", "close"] as const) {
      const { client, child } = await start();
      await client[stop](null as never);
      expect(child.stdinEnded).toBe(true);
      expect(child.signals).toEqual([]);
    }
  });
});

describe("the wait for a confirmed cancel to end its call", () => {
  test("a later cancel with a shorter timeoutMs shortens the wait already running", async () => {
    // The first confirmed cancel's wait (requestTimeoutMs, 60 s) stayed; a host that asked again
    // with `timeoutMs: 100` still waited a minute for a core that never ends the chat.
    const { client, child } = await start();
    const chat = client.chat({ input: "a" });
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    expect(await chat.cancel()).toBe(true);
    expect(await client.cancel(chat.id, { timeoutMs: 100 })).toBe(true);
    const err = await rejection(chat.result);
    expect(err.code).toBe("cancelled");
    expect(err.message).toContain("did not end it within 100 ms");
  }, 5000);
});

describe("call options of the wrong type", () => {
  test("a timeoutMs or signal that is not one rejects naming the option, unsent", async () => {
    // A string timeoutMs silently took the default (60 s, or none for a chat); a signal that is
    // not an AbortSignal threw a TypeError out of the call and left it in the pending table.
    const { client, child } = await start();
    const odd = [
      [{ timeoutMs: "5000" }, "timeoutMs"],
      [{ signal: {} }, "signal"],
      [{ signal: "abort" }, "signal"],
    ] as const;
    for (const [options, named] of odd) {
      for (const call of [
        () => client.ping(options as never),
        () => client.chat({ input: "hi" }, options as never).result,
        () => client.embed({ input: "x" }, options as never),
      ]) {
        const err = await rejection(call());
        expect(err.code).toBe("invalid_request");
        expect(err.message).toContain(named);
      }
    }
    expect(child.requests).toEqual([]);
  });
});

describe("shutdown()'s timeoutMs that is not a number", () => {
  test("is the default, not an immediate kill of a core that answered and is exiting", async () => {
    // "5s" made every deadline NaN: a core that had answered was killed at once (a NaN timer
    // fires at once), and one that never answered was waited for for good (no timer at all).
    const child = new FakeChild((req, c) => {
      if (req.method === "shutdown") c.send({ id: req.id, type: "result", result: { status: "ok" } });
    });
    // Its exit after end of input takes a moment (it stops llama-server first, as the real core does).
    child.eofExitDelayMs = 50;
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    await client.close({ timeoutMs: "5s" as never });
    expect(child.stdinEnded).toBe(true);
    expect(child.signals).toEqual([]);
  });
});

describe("call options whose reading throws (a getter, a Proxy)", () => {
  test("fail the call's promise, never throw out of the call, and leave nothing pending", async () => {
    // Reading the options (or the signal's `aborted`, or its addEventListener) threw out of
    // chat()/request() itself: a host's `.catch()` never saw it, and a throwing addEventListener
    // left the call in the pending table with its timer.
    const { client, child } = await start();
    const boom = () => {
      throw new Error("boom");
    };
    const odd = [
      Object.defineProperty({}, "timeoutMs", { get: boom }),
      Object.defineProperty({}, "signal", { get: boom }),
      new Proxy({}, { get: boom }),
      { signal: Object.defineProperty(new AbortController().signal, "aborted", { get: boom }) },
      { signal: { aborted: false, addEventListener: boom, removeEventListener: () => {} } },
    ];
    for (const options of odd) {
      for (const call of [
        () => client.ping(options as never),
        () => client.chat({ input: "hi" }, options as never).result,
        () => client.embed({ input: "x" }, options as never),
        () => client.request("echo", {}, options as never),
      ]) {
        await refusedNotThrown(call);
      }
    }
    expect(child.requests).toEqual([]);
  });
});

describe("a cancel of a call in flight whose options are of the wrong type", () => {
  test("is refused and leaves the call running, not ended here with the core still at it", async () => {
    // Refused unsent (invalid_request), the cancel still ended the chat on this side as "cancelled"
    // (its refusal taken for a cancel the core did not confirm): the host saw it end while the core
    // generated on, holding the session, and no cancel ever reached it.
    const { client, child } = await start();
    const chat = client.chat({ input: "hi" });
    expect(await waitFor(() => child.requests.some((r) => r.method === "chat"), { intervalMs: 2 })).toBe(
      true,
    );
    let ended = false;
    chat.result.then(
      () => (ended = true),
      () => (ended = true),
    );
    for (const options of [{ timeoutMs: "5000" }, { signal: {} }]) {
      const err = await rejection(client.cancel(chat.id, options as never));
      expect(err.code).toBe("invalid_request");
    }
    // The chat is still the host's to cancel: a valid cancel reaches the core and ends it.
    expect(ended).toBe(false);
    expect(child.requests.filter((r) => r.method === "cancel")).toEqual([]);
    expect(await client.cancel(chat.id)).toBe(true);
  });
});

describe("shutdown()'s options whose reading throws", () => {
  test("take the default: close() stops the core gracefully rather than killing it", async () => {
    // shutdown() rejected before it stopped anything, and close() then killed the core outright,
    // leaving llama-server and the MCP servers running, as close(null) did.
    const { client, child } = await start();
    const options = Object.defineProperty({}, "timeoutMs", {
      get() {
        throw new Error("boom");
      },
    });
    await client.close(options as never);
    expect(child.stdinEnded).toBe(true);
    expect(child.signals).toEqual([]);
  });
});

describe("a chat's onOtherEvent or a stream's cancellable of the wrong type", () => {
  test("fails the call at once with invalid_request naming it, unsent", async () => {
    // Before: sent anyway; onOtherEvent "log" was a logger warning for each event it was due, and
    // cancellable "false" (a settings file's text) made the stream cancellable.
    const { client, child } = await start();
    const calls = [
      client.chat({ input: "hi" }, { onOtherEvent: "log" as never }).result,
      client.stream("test.long", {}, { cancellable: "false" as never }).result,
    ];
    const errs = [];
    for (const call of calls) errs.push(await rejection(call));
    expect(errs.map((e) => e.code)).toEqual(["invalid_request", "invalid_request"]);
    expect(errs[0]?.message).toContain("onOtherEvent must be a function, not a string");
    expect(errs[1]?.message).toContain("cancellable must be a boolean, not a string");
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(child.requests.map((r) => r.method)).toEqual(["ping"]);
  });
});

describe("options, a signal or params that throw something with no text form", () => {
  test("fail the call's promise all the same, never throw out of the call", async () => {
    // String() of a null-prototype object throws a TypeError: raised while the call's failure
    // was written, it threw out of chat() itself, and a refused listener left the call pending.
    const { client, child } = await start();
    const boom = () => {
      throw Object.create(null);
    };
    const odd = [
      new Proxy({}, { get: boom }),
      { signal: { aborted: false, addEventListener: boom, removeEventListener: () => {} } },
    ];
    for (const options of odd) {
      for (const call of [
        () => client.chat({ input: "hi" }, options as never).result,
        () => client.request("echo", {}, options as never),
      ]) {
        expect((await refusedNotThrown(call)).message).toContain("[object Object]");
      }
    }
    // A toJSON that throws null: reading `.message` of it threw a TypeError out of chat().
    const params = { toJSON: boomNull };
    expect(() => client.chat(params as never)).not.toThrow();
    expect((await rejection(client.request("echo", params as never))).code).toBe("invalid_request");
    expect(child.requests).toEqual([]);
  });
});

describe("options that throw something no fallback can describe", () => {
  test("fail the call's promise all the same, never throw out of the call", async () => {
    // A revoked Proxy throws from instanceof, String() and Object.prototype.toString alike; an
    // Error whose message is a null-prototype object throws once put into the error's text.
    const { client, child } = await start();
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const badMessage = new Error("x");
    (badMessage as { message: unknown }).message = Object.create(null);
    for (const thrown of [revoked.proxy, badMessage]) {
      const options = new Proxy(
        {},
        {
          get: () => {
            throw thrown;
          },
        },
      );
      for (const call of [
        () => client.chat({ input: "hi" }, options as never).result,
        () => client.request("echo", {}, options as never),
      ])
        await refusedNotThrown(call);
    }
    expect(child.requests).toEqual([]);
  });
});

/** `call` returns a promise (it throws nothing) that rejects with invalid_request; its error. */
async function refusedNotThrown(call: () => Promise<unknown>) {
  let p: Promise<unknown> | undefined;
  expect(() => {
    p = call();
  }).not.toThrow();
  const err = await rejection(p as Promise<unknown>);
  expect(err.code).toBe("invalid_request");
  return err;
}

function boomNull(): never {
  throw null;
}
