import { describe, expect, test } from "bun:test";
import { MAX_IN_FLIGHT } from "../../src/protocol/method-table.ts";
import { runStdioServer } from "../../src/server/stdio-server.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";

const terminals = (ms: Record<string, any>[], id: unknown) =>
  ms.filter((m) => m.id === id && m.type !== "event");

describe("dispatcher over the in-process loop", () => {
  test("ping, initialize and shutdown work without any config", async () => {
    const h = startHarness();
    expect(await h.request({ id: 1, method: "ping" })).toEqual({
      id: 1,
      type: "result",
      result: { status: "ok" },
    });
    const init = await h.request({ id: "i", method: "initialize", params: { protocol_versions: [1, 7] } });
    expect(init.result.protocol_version).toBe(1);
    expect(init.result.server.name).toBe("local-ai");
    expect(init.result.capabilities.cancel.targeted).toBe(true);
    expect(init.result.capabilities.methods).toContain("cancel");
    expect(init.result.capabilities.events).toContain("llm_chunk");
    expect(typeof init.result.capabilities.parallel_chat.max_concurrent).toBe("number");
    expect(await h.request({ id: 9, method: "shutdown" })).toMatchObject({ type: "result" });
    expect(await h.exit).toBe(0);
  });

  test("status lists only requests still in flight: none answered before it (issue 19 item 8)", async () => {
    const h = startHarness();
    // One write to a fresh dispatcher: every method still has to load.
    h.sendRaw('{"id":"i","method":"initialize"}\n{"id":"p","method":"ping"}\n{"id":"s","method":"status"}\n');
    await h.waitFor((ms) => ms.length >= 3);
    const order = h.messages.map((m) => m.id);
    const listed = h.messages.find((m) => m.id === "s")!.result.requests.map((r: { id: string }) => r.id);
    // Whatever status lists is answered after it; whatever was answered before it is not listed.
    for (const id of ["i", "p"]) expect(listed.includes(id)).toBe(order.indexOf(id) > order.indexOf("s"));
    h.end();
    await h.exit;
  });

  test("ids are echoed with their type", async () => {
    const h = startHarness();
    await h.request({ id: "7", method: "ping" });
    await h.request({ id: 7, method: "ping" });
    await h.request({ id: 0.5, method: "ping" });
    expect(h.messages.map((m) => m.id)).toEqual(["7", 7, 0.5]);
    h.end();
    await h.exit;
  });

  test("a line broken at an emoji gets an invalid_json message that is whole text, no lone surrogate", async () => {
    const h = startHarness();
    // Bun's parser quotes the token it stopped at: half the emoji ('\ud83d'), which a strict
    // JSON parser on the host (serde_json, Swift) refuses, and with it the whole error line.
    h.sendRaw('{"id":1,\u{1F600}}\n');
    await h.request({ id: "after", method: "ping" });
    const err = h.messages.find((m) => m.id === null);
    expect(err).toMatchObject({ code: "invalid_json" });
    expect(String(err?.message).isWellFormed()).toBe(true);
    h.end();
    await h.exit;
  });

  test("bad input gets the right code and the loop keeps going", async () => {
    const h = startHarness();
    h.sendRaw("not json\n");
    h.sendRaw("[1,2]\n");
    h.sendRaw('{"method":"ping"}\n');
    h.sendRaw('{"id":{"x":1},"method":"ping"}\n');
    h.sendRaw('{"id":"a"}\n');
    h.sendRaw('{"id":"b","method":"ping","params":[1]}\n');
    h.sendRaw('{"id":"c","method":"nope"}\n');
    h.sendRaw('{"id":"d","method":"initialize","params":{"protocol_versions":"one"}}\n');
    h.sendRaw('{"id":"e","method":"initialize","params":{"protocol_versions":[2,3]}}\n');
    await h.request({ id: "last", method: "ping" });
    await h.waitFor((ms) => ms.length >= 10);
    const byId = (id: unknown) => h.messages.find((m) => m.id === id);
    const nulls = h.messages.filter((m) => m.id === null).map((m) => m.code);
    expect(nulls).toEqual(["invalid_json", "invalid_request", "invalid_request", "invalid_request"]);
    expect(byId("a")).toMatchObject({ code: "invalid_request" });
    expect(byId("a")!.message).toContain("method");
    expect(byId("b")).toMatchObject({ code: "invalid_request" });
    expect(byId("b")!.message).toContain("params");
    expect(byId("c")).toMatchObject({ code: "unknown_method" });
    expect(byId("d")).toMatchObject({ code: "invalid_request", data: { field: "protocol_versions" } });
    expect(byId("d")!.message).toContain("params.protocol_versions");
    expect(byId("e")).toMatchObject({ code: "invalid_request" });
    expect(byId("e")!.message).toContain("supports [1]");
    expect(byId("last")).toMatchObject({ type: "result" });
    h.end();
    await h.exit;
  });

  test("an unknown method's name is quoted as text: whole characters, one line, cut when long", async () => {
    const h = startHarness();
    // A lone surrogate made the message not text (a strict host parser refuses the line); a
    // newline broke it over lines; a name of the line's length came back whole in the message.
    h.sendRaw(
      `{"id":1,"method":"x\\ud800"}\n{"id":2,"method":"a\\nb"}\n{"id":3,"method":"${"m".repeat(100_000)}"}\n`,
    );
    await h.waitFor((ms) => ms.length >= 3);
    for (const id of [1, 2, 3]) {
      const message = String(h.terminal(id)?.message);
      expect(h.terminal(id)?.code).toBe("unknown_method");
      expect(message.isWellFormed()).toBe(true);
      expect(message).not.toContain("\n");
      expect(message.length).toBeLessThan(200);
    }
    expect(h.terminal(2)?.message).toBe("unknown method 'a\\nb'");
    h.end();
    await h.exit;
  });

  test("the methods that take no params ignore any sent, a lone surrogate in one included", async () => {
    const h = startHarness();
    // Their schemas kept unknown keys, so the surrogate check saw them: a ping was refused
    // invalid_request where docs/protocol.md says its params are ignored.
    h.sendRaw(
      '{"id":1,"method":"ping","params":{"x":"\\ud800"}}\n{"id":2,"method":"status","params":{"\\udc00":1}}\n' +
        '{"id":3,"method":"shutdown","params":{"x":["\\ud800"]}}\n',
    );
    await h.waitFor((ms) => ms.filter((m) => m.type !== "event").length >= 3);
    for (const id of [1, 2, 3]) expect(h.terminal(id)?.type).toBe("result");
    expect(h.terminal(1)?.result).toEqual({ status: "ok" });
    expect(await h.exit).toBe(0);
  });

  test("requests run concurrently: a long request never delays a ping", async () => {
    const h = startHarness();
    h.send({ id: "long", method: "test.sleep", params: { ms: 3000 } });
    const pong = await h.request({ id: "p", method: "ping" }, 1000);
    expect(pong.type).toBe("result");
    expect(h.terminal("long")).toBeUndefined();
    expect((await h.request({ id: "c", method: "cancel", params: { request_id: "long" } })).result).toEqual({
      cancelled: true,
    });
    h.end();
    await h.exit;
  });

  test("past MAX_IN_FLIGHT a request is refused at once with too_many_requests; the controls still answer", async () => {
    const h = startHarness();
    let lines = "";
    for (let i = 0; i < MAX_IN_FLIGHT; i++)
      lines += `{"id":${i},"method":"test.sleep","params":{"ms":60000}}\n`;
    h.sendRaw(`${lines}{"id":"over","method":"test.sleep","params":{"ms":1}}\n{"id":"p","method":"ping"}\n`);
    await h.waitFor((ms) => terminals(ms, "over").length === 1 && terminals(ms, "p").length === 1);
    expect(terminals(h.messages, "over")[0]).toMatchObject({
      type: "error",
      code: "too_many_requests",
      data: { limit: MAX_IN_FLIGHT },
    });
    expect(terminals(h.messages, "p")[0]).toMatchObject({ type: "result" });
    const status = await h.request({ id: "s", method: "status" });
    expect(status.result.requests.length).toBeGreaterThan(0);
    // One ends: there is room for one more.
    expect((await h.request({ id: "c", method: "cancel", params: { request_id: 0 } })).result.cancelled).toBe(
      true,
    );
    await h.waitFor((ms) => terminals(ms, 0).length === 1);
    h.send({ id: "again", method: "test.sleep", params: { ms: 1 } });
    await h.waitFor((ms) => terminals(ms, "again").length === 1);
    expect(terminals(h.messages, "again")[0]).toMatchObject({ type: "result" });
    expect((await h.request({ id: "bye", method: "shutdown" })).type).toBe("result");
    expect(await h.exit).toBe(0);
  }, 30000);

  test("a number id beyond 2^53 comes back as the same JSON text, and cancel names it exactly", async () => {
    const h = startHarness();
    const big = "18446744073709551616";
    const next = "18446744073709551617"; // the same double as `big`
    h.sendRaw(`{"id":${big},"method":"test.sleep","params":{"ms":3000}}\n`);
    h.sendRaw(`{"id":${next},"method":"test.sleep","params":{"ms":150}}\n`);
    h.sendRaw(`{"id":1e400,"method":"ping"}\n{"id":2.50,"method":"ping"}\n`);
    h.sendRaw(`{"id":"k","method":"cancel","params":{"request_id":${big}}}\n`);
    await h.waitFor((ms) => terminals(ms, Number(big)).length === 2);
    const ends = h.lines.filter((l) => l.includes(`"id":${big}`) || l.includes(`"id":${next}`));
    expect(ends.some((l) => l.includes(`"id":${big},"type":"error","code":"cancelled"`))).toBe(true);
    expect(ends.some((l) => l.includes(`"id":${next},"type":"result"`))).toBe(true);
    expect(h.messages.find((m) => m.id === "k")?.result).toEqual({ cancelled: true });
    expect(h.messages.find((m) => m.id === null)).toMatchObject({ code: "invalid_request" });
    expect(h.lines).toContain(`{"id":2.50,"type":"result","result":{"status":"ok"}}`);
    h.end();
    await h.exit;
  });

  test("a number id spelled otherwise than a double prints it comes back as sent; cancel finds it by value", async () => {
    const h = startHarness();
    h.sendRaw(`{"id":1.0,"method":"ping"}\n{"id" : 1e2 ,"method":"ping"}\n{"id":-0,"method":"ping"}\n`);
    // -1E-400 is the id 0 by value, as -0 is: it may be used once -0 has answered.
    await h.waitFor((ms) => ms.length >= 3);
    h.sendRaw(`{"method":"ping","params":{},"id":-1E-400}\n{"id":3,"method":"ping"}\n`);
    h.sendRaw(`{"\\u0069d":4.0,"method":"ping"}\n`);
    h.sendRaw(`{"id":7.0,"method":"test.sleep","params":{"ms":3000}}\n`);
    h.sendRaw(`{"id":"k","method":"cancel","params":{"request_id":7}}\n`);
    await h.waitFor(
      (ms) => ms.filter((m) => m.type === "result").length >= 7 && ms.some((m) => m.type === "error"),
    );
    for (const sent of ["1.0", "1e2", "-0", "-1E-400", "3", "4.0"])
      expect(h.lines).toContain(`{"id":${sent},"type":"result","result":{"status":"ok"}}`);
    expect(h.messages.find((m) => m.id === "k")?.result).toEqual({ cancelled: true });
    expect(h.lines.some((l) => l.startsWith(`{"id":7.0,"type":"error","code":"cancelled"`))).toBe(true);
    h.end();
    await h.exit;
  });

  test("numbers past a double (1e400, 2e400: both Infinity) are never ids, nor a cancel's request_id", async () => {
    const h = startHarness();
    h.sendRaw(`{"id":1e400,"method":"test.sleep","params":{"ms":150}}\n{"id":2e400,"method":"ping"}\n`);
    h.sendRaw(`{"id":5,"method":"test.sleep","params":{"ms":150}}\n`);
    h.sendRaw(`{"id":"k","method":"cancel","params":{"request_id":2e400}}\n`);
    await h.waitFor((ms) => terminals(ms, 5).length === 1 && terminals(ms, "k").length === 1);
    const refused = h.messages.filter((m) => m.id === null);
    expect(refused).toHaveLength(2);
    for (const m of refused)
      expect(m).toMatchObject({ code: "invalid_request", message: expect.stringContaining("'id'") });
    expect(terminals(h.messages, "k")[0]).toMatchObject({
      code: "invalid_request",
      data: { field: "request_id" },
    });
    expect(terminals(h.messages, 5)[0]?.type).toBe("result");
    h.end();
    await h.exit;
  });

  test("an id already in use is quoted cut in its error: an 8 MB id is not written twice", async () => {
    const h = startHarness();
    const long = "x".repeat(1_000_000);
    h.send({ id: long, method: "test.sleep", params: { ms: 60000 } });
    h.send({ id: long, method: "ping" });
    await h.waitFor((ms) => ms.some((m) => m.id === long && m.type === "error"));
    const refusal = h.messages.find((m) => m.id === long && m.type === "error");
    expect(refusal?.message).toContain("is already in use by an active request");
    expect(String(refusal?.message ?? "").length).toBeLessThan(200);
    h.end();
    await h.exit;
  });

  test("an id of -0 is the id 0 by value: taken while active, and cancel's request_id 0 finds it", async () => {
    const h = startHarness();
    h.sendRaw(`{"id":-0,"method":"test.sleep","params":{"ms":60000}}\n{"id":0,"method":"ping"}\n`);
    h.sendRaw(`{"id":"k","method":"cancel","params":{"request_id":0}}\n`);
    await h.waitFor((ms) => terminals(ms, 0).length === 2 && terminals(ms, "k").length === 1);
    expect(h.lines).toContain(
      `{"id":0,"type":"error","code":"invalid_request","message":"id 0 is already in use by an active request"}`,
    );
    expect(h.messages.find((m) => m.id === "k")?.result).toEqual({ cancelled: true });
    expect(h.lines.some((l) => l.startsWith(`{"id":-0,"type":"error","code":"cancelled"`))).toBe(true);
    h.end();
    await h.exit;
  });

  test("an integer beyond 2^53 is told by its digits however it is spelled: 2^53+1 written 9007199254740993.0 is not 2^53", async () => {
    const h = startHarness();
    h.sendRaw(`{"id":9007199254740992,"method":"test.sleep","params":{"ms":60000}}\n`);
    h.sendRaw(`{"id":9007199254740993.0,"method":"test.sleep","params":{"ms":60000}}\n`);
    // The same integer as the one before, spelled otherwise: a duplicate.
    h.sendRaw(`{"id":9.007199254740993e15,"method":"ping"}\n`);
    h.sendRaw(`{"id":"k","method":"cancel","params":{"request_id":9007199254740993}}\n`);
    await h.waitFor(() => h.lines.some((l) => l.startsWith(`{"id":9007199254740993.0,"type":"error"`)));
    expect(h.lines).toContain(
      `{"id":9.007199254740993e15,"type":"error","code":"invalid_request","message":"id 9.007199254740993e15 is already in use by an active request"}`,
    );
    expect(
      h.lines.some((l) => l.startsWith(`{"id":9007199254740993.0,"type":"error","code":"cancelled"`)),
    ).toBe(true);
    expect(h.lines.some((l) => l.startsWith(`{"id":9007199254740992,`))).toBe(false);
    h.end();
    await h.exit;
  });

  test("a deeply nested line whose ids must be read exactly is answered, and the core reads on", async () => {
    const h = startHarness();
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
    h.sendRaw(`{"id":1.5,"method":"ping","params":{"a":${deep}}}\n{"id":2,"method":"ping"}\n`);
    await h.waitFor((ms) => ms.some((m) => m.id === 2));
    expect(h.lines[0]).toBe(`{"id":1.5,"type":"result","result":{"status":"ok"}}`);
    expect(h.messages.find((m) => m.id === 2)?.type).toBe("result");
    h.end();
    await h.exit;
  });

  test("a second request reusing an active id is rejected; the first is untouched", async () => {
    const h = startHarness();
    h.send({ id: "x", method: "test.sleep", params: { ms: 200 } });
    h.send({ id: "x", method: "ping" });
    await h.waitFor((ms) => terminals(ms, "x").length === 2);
    const [dup, done] = terminals(h.messages, "x");
    expect(dup).toMatchObject({ type: "error", code: "invalid_request" });
    expect(done).toMatchObject({ type: "result" });
    // Once finished, the id may be used again.
    expect((await h.request({ id: "x", method: "ping" })).type).toBe("result");
    h.end();
    await h.exit;
  });

  test("cancel: targeted, implicit with one active, ambiguous with several, false when absent", async () => {
    const h = startHarness();
    expect((await h.request({ id: "c0", method: "cancel", params: {} })).result).toEqual({
      cancelled: false,
    });
    h.send({ id: "a", method: "test.sleep", params: { ms: 5000 } });
    expect((await h.request({ id: "c1", method: "cancel" })).result).toEqual({ cancelled: true });
    await h.waitFor(() => h.terminal("a") !== undefined);
    const aEvents = h.messages.filter((m) => m.id === "a");
    expect(aEvents.at(-2)).toMatchObject({ type: "event", event: "loop_abort" });
    expect(h.terminal("a")).toMatchObject({ type: "error", code: "cancelled" });

    h.send({ id: 1, method: "test.sleep", params: { ms: 5000 } });
    h.send({ id: 2, method: "test.sleep", params: { ms: 5000 } });
    const ambiguous = await h.request({ id: "c2", method: "cancel" });
    expect(ambiguous).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "request_id" },
    });
    // Named as what they are, not "2 chats": a host may have a documents.add or a pull in flight.
    expect(ambiguous.message).toBe(
      "request_id is required while 2 cancellable requests are active: 1 (test.sleep), 2 (test.sleep)",
    );
    // A host's id of any length is quoted cut: four whole could outgrow the answer's line.
    h.send({ id: "x".repeat(1_000_000), method: "test.sleep", params: { ms: 5000 } });
    const long = await h.request({ id: "c2b", method: "cancel" });
    expect(long.message).toContain(`"${"x".repeat(70)}`);
    expect(long.message.length).toBeLessThan(400);
    expect(
      (await h.request({ id: "c2c", method: "cancel", params: { request_id: "x".repeat(1_000_000) } }))
        .result,
    ).toEqual({
      cancelled: true,
    });
    expect((await h.request({ id: "c3", method: "cancel", params: { request_id: "2" } })).result).toEqual({
      cancelled: false,
    });
    expect((await h.request({ id: "c4", method: "cancel", params: { request_id: 2 } })).result).toEqual({
      cancelled: true,
    });
    await h.waitFor(() => h.terminal(2) !== undefined);
    expect(h.terminal(1)).toBeUndefined(); // cancelling one never disturbs another
    expect((await h.request({ id: "c5", method: "cancel", params: { request_id: 2 } })).result).toEqual({
      cancelled: false,
    });
    h.end();
    await h.exit;
    expect(h.terminal(1)).toMatchObject({ code: "cancelled" });
  });

  test("an implicit cancel leaves out a request already cancelled that has not ended yet", async () => {
    const h = startHarness();
    await h.request({ id: "warm", method: "cancel", params: { request_id: "none" } });
    h.send({ id: "a", method: "test.sleep", params: { ms: 60000, tick_ms: 1 } });
    h.send({ id: "b", method: "test.sleep", params: { ms: 60000, tick_ms: 1 } });
    await h.waitFor((ms) => ["a", "b"].every((id) => ms.some((m) => m.id === id && m.event === "tick")));
    // One read: "a" is cancelled but not yet ended when the implicit cancel is read.
    h.sendRaw('{"id":"ca","method":"cancel","params":{"request_id":"a"}}\n{"id":"c","method":"cancel"}\n');
    await h.waitFor((ms) => terminals(ms, "c").length === 1 && terminals(ms, "b").length === 1);
    expect(h.terminal("c")?.result).toEqual({ cancelled: true });
    expect(h.terminal("b")).toMatchObject({ type: "error", code: "cancelled" });
    h.end();
    await h.exit;
  });

  test("a request cancelled while its method loads ends cancelled, not with what running it would say", async () => {
    const h = startHarness();
    // One read to a fresh core: each waits for its module when the cancel is read. No config
    // (config_missing) and bad params (invalid_request) were answered after {cancelled: true}.
    h.sendRaw(
      '{"id":"r","method":"chat","params":{"input":"hi"}}\n{"id":"c","method":"cancel","params":{"request_id":"r"}}\n' +
        '{"id":"p","method":"pull","params":{}}\n{"id":"cp","method":"cancel","params":{"request_id":"p"}}\n',
    );
    await h.waitFor((ms) => ms.filter((m) => m.type !== "event").length >= 4);
    expect(h.terminal("c")?.result).toEqual({ cancelled: true });
    expect(h.terminal("cp")?.result).toEqual({ cancelled: true });
    expect(h.terminal("r")).toMatchObject({ type: "error", code: "cancelled" });
    expect(h.terminal("p")).toMatchObject({ type: "error", code: "cancelled" });
    h.end();
    await h.exit;
  });

  test("an unexpected failure is internal_error without the stack or the detail", async () => {
    const h = startHarness();
    const r = await h.request({ id: 1, method: "test.fail" });
    expect(r).toMatchObject({ type: "error", code: "internal_error" });
    expect(JSON.stringify(r)).not.toContain("secret");
    expect(JSON.stringify(r)).not.toContain("at ");
    const planned = await h.request({ id: 2, method: "test.fail", params: { kind: "core" } });
    expect(planned).toMatchObject({ code: "model_plan_error", data: { needed: 2, available: 1 } });
    h.end();
    await h.exit;
  });

  test("a failure thrown as a value with no string form is still answered internal_error", async () => {
    const h = startHarness();
    // String() throws on it: the log of it threw in turn and the request was never answered.
    const r = await h.request({ id: 1, method: "test.fail", params: { kind: "opaque" } });
    expect(r).toMatchObject({ type: "error", code: "internal_error" });
    expect((await h.request({ id: 2, method: "ping" })).type).toBe("result");
    h.end();
    expect(await h.exit).toBe(0);
  });

  test("a fault no code caught, thrown as a value with no string form, still stops the core in order", async () => {
    let fault: ((err: unknown, fatal: boolean) => void) | undefined;
    const exit = runStdioServer({
      configPath: "config.yaml",
      cwd: "/nonexistent-local-ai-test",
      input: new ReadableStream<Uint8Array>(),
      sink: { write() {} },
      onFault: (h) => {
        fault = h;
        return () => {};
      },
    });
    // Thrown from the uncaughtException listener, a second throw ends the process at once (exit
    // 7), llama-server and the MCP servers left running: the listener must never throw.
    expect(() => fault?.(Object.create(null), false)).not.toThrow();
    expect(() => fault?.(Object.create(null), true)).not.toThrow();
    expect(await exit).toBe(1);
  });

  test("shutdown cancels in-flight work first: their errors come before its result", async () => {
    const h = startHarness();
    h.send({ id: "s1", method: "test.sleep", params: { ms: 10000 } });
    h.send({ id: "s2", method: "test.sleep", params: { ms: 10000 } });
    await h.request({ id: "p", method: "ping" });
    await h.request({ id: "bye", method: "shutdown" });
    expect(await h.exit).toBe(0);
    const order = h.messages.filter((m) => m.type !== "event").map((m) => `${m.id}:${m.code ?? "ok"}`);
    expect(order.slice(-3).sort()).toEqual(["bye:ok", "s1:cancelled", "s2:cancelled"].sort());
    expect(order.at(-1)).toBe("bye:ok");
  });

  test("two shutdowns in one read are both answered; nothing deadlocks", async () => {
    const h = startHarness();
    h.send({ id: "s", method: "test.sleep", params: { ms: 10000 } });
    await h.request({ id: "p", method: "ping" });
    h.sendRaw('{"id":"a","method":"shutdown"}\n{"id":"b","method":"shutdown"}\n');
    const code = await Promise.race([h.exit, Bun.sleep(5000).then(() => "hung")]);
    expect(code).toBe(0);
    expect(h.terminal("a")).toMatchObject({ type: "result" });
    expect(h.terminal("b")).toMatchObject({ type: "result" });
    expect(h.terminal("s")).toMatchObject({ code: "cancelled" });
  });

  test("requests in the same read after a shutdown are answered cancelled, as later ones are", async () => {
    const h = startHarness();
    h.sendRaw('{"id":"bye","method":"shutdown"}\n{"id":"p","method":"ping"}\n{"id":"pl","method":"plan"}\n');
    expect(await h.exit).toBe(0);
    expect(h.terminal("bye")).toMatchObject({ type: "result" });
    expect(h.terminal("p")).toMatchObject({ code: "cancelled" });
    expect(h.terminal("pl")).toMatchObject({ code: "cancelled" });
  });

  test("a signal shuts down like EOF: chats cancelled, exit 0", async () => {
    const h = startHarness();
    h.send({ id: "s", method: "test.sleep", params: { ms: 10000 } });
    await h.request({ id: "p", method: "ping" });
    h.signal("SIGTERM");
    expect(await h.exit).toBe(0);
    expect(h.terminal("s")).toMatchObject({ code: "cancelled" });
  });

  test("methods that need a config answer config_missing; the rest still work", async () => {
    const h = startHarness({ cwd: "/nonexistent-dir" });
    const r = await h.request({ id: 1, method: "plan" });
    expect(r).toMatchObject({ type: "error", code: "config_missing" });
    expect((await h.request({ id: 2, method: "ping" })).type).toBe("result");
    h.end();
    await h.exit;
  });
});
