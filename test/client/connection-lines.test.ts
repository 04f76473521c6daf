import { heapStats } from "bun:jsc";
import { describe, expect, test } from "bun:test";
import { Connection } from "../../src/client/connection.ts";
import type { Transport } from "../../src/client/connection-types.ts";
import { LocalAiError } from "../../src/client/errors.ts";

/** A core that takes every line and answers nothing until told. */
function quietCore(): Transport & { lines: string[] } {
  const lines: string[] = [];
  const write = (line: string) => {
    lines.push(line);
    return { kind: "written" as const };
  };
  return { lines, exitInfo: undefined, write };
}

const options = {
  requestTimeoutMs: 0,
  streamTimeoutMs: undefined,
  maxBufferedEvents: 100,
  maxBufferedBytes: 1024 * 1024,
  logger: undefined,
};

describe("a pending call's request line", () => {
  // An image chat's line is tens of MB; it was held for the whole chat, though never written again.
  test("is let go once written: only its size is kept, and a line_too_long still finds its call", async () => {
    const conn = new Connection(options);
    const core = quietCore();
    conn.attach(core);
    const big = conn.open("chat", { input: "é".repeat(100_000) }, {}, { cancellable: true });
    const small = conn.open("ping", {}, {}, { cancellable: false });
    const held = (conn as unknown as { pending: Map<string, { line: string; lineBytes?: number }> }).pending;
    expect([...held.values()].map((p) => p.line)).toEqual(["", ""]);
    const bytes = Buffer.byteLength(core.lines[0] as string, "utf8");
    expect(held.get(String(big.id))?.lineBytes).toBe(bytes);
    // The core refuses the big line by its size: that call fails, the other waits on.
    conn.receive(
      JSON.stringify({
        id: null,
        type: "error",
        code: "invalid_request",
        message: "too long",
        data: { reason: "line_too_long", line_bytes: bytes, limit_bytes: 1024 },
      }),
    );
    const failed = await big.result.catch((e: { code: string }) => e.code);
    expect(failed).toBe("invalid_request");
    expect(held.has(String(small.id))).toBe(true);
  });
});

const cancelsOf = (core: { lines: string[] }) =>
  core.lines.map((l) => JSON.parse(l)).filter((m: { method: string }) => m.method === "cancel");

describe("a stream failed on the client's side by a broken message", () => {
  // Failed here, it was left running on the core, generating for nobody (a lost line was cancelled).
  test.each([
    ["an event without a name", { type: "event", seq: 1 }],
    ["an event whose name is not a string", { type: "event", event: 7 }],
    ["a result without a result", { type: "result" }],
    ["an error without code and message", { type: "error", code: 3 }],
  ])("%s fails it with protocol_error and cancels it on the core", async (_, broken) => {
    const conn = new Connection(options);
    const core = quietCore();
    conn.attach(core);
    const chat = conn.open("chat", { input: "hi" }, {}, { cancellable: true });
    conn.receive(JSON.stringify({ id: chat.id, ...broken }));
    expect(await chat.result.catch((e: { code: string }) => e.code)).toBe("protocol_error");
    expect(cancelsOf(core).map((m: { params: unknown }) => m.params)).toEqual([{ request_id: chat.id }]);
  });

  test("a call that is no stream is not cancelled", async () => {
    const conn = new Connection(options);
    const core = quietCore();
    conn.attach(core);
    const call = conn.open("ping", {}, {}, { cancellable: false });
    conn.receive(JSON.stringify({ id: call.id, type: "result" }));
    expect(await call.result.catch((e: { code: string }) => e.code)).toBe("protocol_error");
    expect(cancelsOf(core)).toEqual([]);
  });
});

describe("calls failed together by one exit", () => {
  // They shared one data object: a host that changed one error's data changed the others'.
  test("each get their own copy of its data", async () => {
    const conn = new Connection(options);
    conn.attach(quietCore());
    const a = conn.open("chat", {}, {}, { cancellable: true });
    const b = conn.open("ping", {}, {}, { cancellable: false });
    const data = { exit_code: 1, signal: null, stderr_tail: ["boom"] };
    conn.failAll(new LocalAiError("core_exited", "the core exited", data));
    const ea = (await a.result.catch((e) => e)) as LocalAiError<"core_exited">;
    const eb = (await b.result.catch((e) => e)) as LocalAiError<"core_exited">;
    ea.data?.stderr_tail?.push("added by the host");
    expect(eb.data).toEqual({ exit_code: 1, signal: null, stderr_tail: ["boom"] });
    expect(data.stderr_tail).toEqual(["boom"]);
  });

  // Each copy held the stderr tail's text anew (50 lines of up to 64 KiB): a few hundred calls
  // pending at a crash took hundreds of MB. The text cannot change; only what holds it is copied.
  test("their copies share the tail's text, which cannot change", async () => {
    const conn = new Connection(options);
    conn.attach(quietCore());
    const calls = Array.from({ length: 200 }, () => conn.open("ping", {}, {}, { cancellable: false }));
    const tail = Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(16 * 1024, "x"));
    const heap = () => {
      Bun.gc(true);
      const h = heapStats();
      return h.heapSize + h.extraMemorySize;
    };
    const before = heap();
    conn.failAll(
      new LocalAiError("core_exited", "the core exited", { exit_code: 1, signal: null, stderr_tail: tail }),
    );
    const failed = (c: (typeof calls)[number]) => c.result.catch((e) => e as LocalAiError<"core_exited">);
    const errors = (await Promise.all(calls.map(failed))) as LocalAiError<"core_exited">[];
    // 200 copies of 800 KiB of text would be over 160 MB.
    expect(heap() - before).toBeLessThan(16 * 1024 * 1024);
    expect(errors.map((e) => e.data?.stderr_tail?.length)).toEqual(Array(200).fill(50));
    expect(errors[0]?.data?.stderr_tail).not.toBe(errors[1]?.data?.stderr_tail);
  });
});

describe("a line from a core replaced since", () => {
  // Still read after it was replaced (a grandchild holding its stdout), it could settle a call
  // written to the new core: one naming its id, or a line_too_long of the same line size.
  test("settles no call written to another core", async () => {
    const conn = new Connection(options);
    const old = quietCore();
    conn.attach(old);
    const lost = conn.open("chat", { input: "hi" }, {}, { cancellable: true });
    conn.failAll(new LocalAiError("core_exited", "the core exited"), (sentTo) => sentTo === old);
    await lost.result.catch(() => {});
    const fresh = quietCore();
    conn.attach(fresh);
    const chat = conn.open("chat", { input: "hi" }, {}, { cancellable: true });
    const bytes = Buffer.byteLength(fresh.lines[0] as string, "utf8");
    const tooLong = { id: null, type: "error", code: "invalid_request", message: "too long" };
    conn.receive(JSON.stringify({ ...tooLong, data: { reason: "line_too_long", line_bytes: bytes } }), old);
    conn.receive(JSON.stringify({ id: chat.id, type: "result", result: { response: "stale" } }), old);
    conn.receive(`{"id":"${chat.id}","type":"event",`, old);
    conn.oversizeLine(10_000_000, `{"id":"${chat.id}","type":"event",`, 1024, old);
    expect(chat.done).toBe(false);
    conn.receive(JSON.stringify({ id: chat.id, type: "result", result: { response: "ok" } }), fresh);
    expect(await chat.result).toEqual({ response: "ok" });
  });
});
