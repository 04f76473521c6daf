import { afterEach, describe, expect, test } from "bun:test";
import { type ChatEvent, type GenericEvent, LocalAiClient, LocalAiError } from "../../src/client/index.ts";
import { DoctorResultSchema } from "../../src/protocol/doctor.ts";
import { initializeResultSchema } from "../../src/protocol/initialize.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { hostBinary } from "./host-binary.ts";

// The client against the compiled core, using its test-only methods for streaming and cancel.
const clients: LocalAiClient[] = [];

async function start(extra: { restart?: boolean; cwd?: string } = {}) {
  const client = await LocalAiClient.start({
    binary: hostBinary(),
    env: { ...process.env, LOCAL_AI_TEST_METHODS: "1" },
    cwd: extra.cwd,
    restart: extra.restart ? { initialDelayMs: 100 } : false,
  });
  clients.push(client);
  return client;
}

async function rejection(p: Promise<unknown>): Promise<LocalAiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LocalAiError);
  return err as LocalAiError;
}

afterEach(() => {
  for (const c of clients.splice(0)) c.kill();
});

describe("client against the compiled core", () => {
  test("initialize, ping and doctor answer with the documented shapes", async () => {
    await using dir = tmpdir();
    const client = await start({ cwd: dir.path });
    expect(initializeResultSchema().parse(client.info).protocol_version).toBe(1);
    expect(client.info?.capabilities.methods).toContain("test.sleep");
    expect(await client.ping()).toEqual({ status: "ok" });
    const report = DoctorResultSchema.parse(await client.doctor());
    // No config.yaml in this folder: doctor reports it instead of failing.
    expect(report.ok).toBe(false);
    expect(report.checks.find((c) => c.id === "config")?.status).toBe("fail");
  });

  test("plan without a config rejects with config_missing naming the file", async () => {
    await using dir = tmpdir();
    const client = await start({ cwd: dir.path });
    const err = await rejection(client.plan());
    expect(err.code).toBe("config_missing");
    expect(String(err.data?.file)).toContain(dir.path);
    // The conversations, documents and embed need it too (their data folder, their model), as
    // docs/protocol.md's Lifecycle now says; status and models answer without it.
    for (const call of [client.sessions.list(), client.documents.list(), client.embed({ input: "x" })])
      expect((await rejection(call)).code).toBe("config_missing");
    expect((await client.status()).llama.state).toBe("stopped");
    expect((await client.models()).models).toBeArray();
  });

  test("a stream yields its events, and cancel ends it with cancelled while ping still answers", async () => {
    const client = await start();
    const sleep = client.stream("test.sleep", { ms: 20_000, tick_ms: 50 });
    // Read by hand, not in a loop left early: that would cancel it (leave-stream.test.ts).
    const events = sleep[Symbol.asyncIterator]();
    const seen: GenericEvent[] = [];
    while (seen.length < 3) seen.push((await events.next()).value as GenericEvent);
    expect(seen.map((e) => e.event)).toEqual(["tick", "tick", "tick"]);
    expect(seen.map((e) => e.n)).toEqual([0, 1, 2]);
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(await sleep.cancel()).toBe(true);
    expect((await rejection(sleep.result)).code).toBe("cancelled");
    expect(await client.cancel(sleep.id)).toBe(false);
  });

  test("a core-side CoreError keeps its code and data", async () => {
    const client = await start();
    const err = await rejection(client.request("test.fail", { kind: "core" }));
    expect(err.code).toBe("model_plan_error");
    expect(err.data).toEqual({ needed: 2, available: 1 });
    expect((await rejection(client.request("no.such.method"))).code).toBe("unknown_method");
  });

  test("a timeout rejects the call and the core stops the cancellable work", async () => {
    const client = await start();
    const sleep = client.stream("test.sleep", { ms: 20_000, tick_ms: 1000 }, { timeoutMs: 300 });
    expect((await rejection(sleep.result)).code).toBe("timeout");
    // Nothing the client shows marks its own cancel's arrival at the core: give it time.
    await Bun.sleep(200);
    // The client cancelled it on the core's side: nothing is left to cancel.
    expect(await client.cancel(sleep.id)).toBe(false);
  });

  test("a flood of events arrives in order with its result", async () => {
    const client = await start();
    const flood = client.stream<{ emitted: number; dropped_events: number }>("test.flood", {
      count: 2000,
      size: 8,
    });
    let n = 0;
    let ordered = true;
    for await (const ev of flood) {
      if (ev.n !== n) ordered = false;
      n++;
    }
    const result = await flood.result;
    expect(result.emitted).toBe(2000);
    expect(n + result.dropped_events).toBe(2000);
    expect(ordered || result.dropped_events > 0).toBe(true);
  });

  test("a killed core rejects the pending stream with core_exited and restarts", async () => {
    const client = await start({ restart: true });
    const sleep = client.stream("test.sleep", { ms: 20_000 });
    const pid = client.pid!;
    process.kill(pid, "SIGKILL");
    const err = await rejection(sleep.result);
    expect(err.code).toBe("core_exited");
    expect(err.data?.signal).toBe("SIGKILL");
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(client.pid).not.toBe(pid);
  });

  test("shutdown ends in-flight work with cancelled and the process exits", async () => {
    const client = await start();
    const sleep = client.stream("test.sleep", { ms: 20_000 });
    await client.ping();
    const pid = client.pid!;
    await client.shutdown();
    expect((await rejection(sleep.result)).code).toBe("cancelled");
    expect(() => process.kill(pid, 0)).toThrow();
  });

  test("chat events are typed by name", () => {
    // Compile-time check that narrowing works; at run time it only proves the shape.
    const ev = { id: "1", type: "event", event: "llm_chunk", step: 0, delta: "x" } as ChatEvent;
    const text = ev.event === "llm_chunk" ? ev.delta : "";
    expect(text).toBe("x");
  });
});
