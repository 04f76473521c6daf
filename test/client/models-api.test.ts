import { afterEach, describe, expect, test } from "bun:test";
import { killFakes, rejection, startFake } from "./fake-core-fixture.ts";

// client.models.load/unload and plan's `model` against the scripted core: what each puts on the
// wire, and which calls the host can cancel there.
afterEach(killFakes);

type Echo = { method: string; params: Record<string, unknown> };
const echo = (p: Promise<unknown>) => p as Promise<Echo>;
/** The ids of the calls the scripted core holds unanswered. */
const hanging = async (client: Awaited<ReturnType<typeof startFake>>) =>
  ((await client.request("hanging")) as { ids: string[] }).ids;

describe("client.models", () => {
  test("called, it is the listing; load streams warmup_progress, unload is a short call", async () => {
    const client = await startFake();
    expect(await echo(client.models())).toEqual({ method: "models", params: {} });
    const load = client.models.load({ model: "qwen3-8b", pin: true });
    const phases: string[] = [];
    for await (const ev of load) if (ev.phase === "waiting_for_memory") phases.push(ev.models.join());
    expect(phases).toEqual(["a"]);
    expect(await echo(load.result)).toEqual({
      method: "models.load",
      params: { model: "qwen3-8b", pin: true },
    });
    expect(await echo(client.models.unload({ model: "qwen3-8b", force: true }))).toEqual({
      method: "models.unload",
      params: { model: "qwen3-8b", force: true },
    });
  });

  test("a load the host aborts is cancelled on the core's side (the protocol's table: cancellable)", async () => {
    const client = await startFake();
    const controller = new AbortController();
    const load = client.models.load({ model: "hang" }, { signal: controller.signal });
    expect(await hanging(client)).toEqual([load.id as string]);
    controller.abort();
    expect((await rejection(load.result)).code).toBe("cancelled");
    expect(await hanging(client)).toEqual([]);
  });
});

describe("client.models.unload, cancellable by its id", () => {
  // The core cancels an unload by its id while its path's drive is asked (docs/protocol.md
  // "models.unload"); sent as a plain short call, the host's abort or time limit left the core
  // waiting on the dead drive for its 30 s, and shutdown behind it.
  test("an unload the host aborts, or whose time limit passes, is cancelled on the core's side", async () => {
    const client = await startFake();
    const controller = new AbortController();
    const unload = client.models.unload({ model: "hang" }, { signal: controller.signal });
    expect(await hanging(client)).toHaveLength(1);
    controller.abort();
    expect((await rejection(unload)).code).toBe("cancelled");
    expect(await hanging(client)).toEqual([]);
    const timed = client.models.unload({ model: "hang" }, { timeoutMs: 50 });
    expect((await rejection(timed)).code).toBe("timeout");
    expect(await hanging(client)).toEqual([]);
  });

  test("a cancel without an id is the chat's, never the unload's, as the core picks it", async () => {
    const client = await startFake();
    const unload = client.models.unload({ model: "hang" });
    const chat = client.chat({ input: "hang" });
    expect(await hanging(client)).toHaveLength(2);
    expect(await client.cancel()).toBe(true);
    expect((await rejection(chat.result)).code).toBe("cancelled");
    // The unload alone: the core's implicit cancel passes it over, and so does the client's.
    expect(await client.cancel()).toBe(false);
    expect(await hanging(client)).toHaveLength(1);
    unload.catch(() => {});
  });
});

describe("client.models.unload, aborted as its unload begins", () => {
  // docs/bootstrap.md: one whose unload had begun resolves with its result. The core refuses the
  // cancel (`{cancelled:false}`: decided) and then answers what it unloaded.
  test("an unload the host aborts after it began resolves with its result", async () => {
    const client = await startFake();
    const controller = new AbortController();
    const unload = client.models.unload({ model: "begun" }, { signal: controller.signal });
    await client.request("hanging"); // The core has read it.
    controller.abort();
    expect(await echo(unload)).toEqual({ method: "models.unload", params: { model: "begun" } });
    // A time limit ends the wait whatever the core then says (docs/bootstrap.md).
    const timed = client.models.unload({ model: "begun" }, { timeoutMs: 50 });
    expect((await rejection(timed)).code).toBe("timeout");
  });
});

describe("client.plan", () => {
  test("sends `model` as its param; timeoutMs and signal stay call options, never params", async () => {
    const client = await startFake();
    expect(await echo(client.plan())).toEqual({ method: "plan", params: {} });
    expect(await echo(client.plan({ model: "qwen3-8b" }))).toEqual({
      method: "plan",
      params: { model: "qwen3-8b" },
    });
    // Written before `model` existed: the first argument was the call options alone.
    const signal = new AbortController().signal;
    expect(await echo(client.plan({ timeoutMs: 5000, signal }))).toEqual({ method: "plan", params: {} });
    expect(await echo(client.plan({ model: "x" }, { timeoutMs: 5000 }))).toEqual({
      method: "plan",
      params: { model: "x" },
    });
  });

  test("a time limit beside `model`, or in the second argument, limits the call", async () => {
    const client = await startFake();
    expect((await rejection(client.plan({ model: "hang", timeoutMs: 50 }))).code).toBe("timeout");
    expect((await rejection(client.plan({ model: "hang" }, { timeoutMs: 50 }))).code).toBe("timeout");
    const controller = new AbortController();
    controller.abort();
    const aborted = await rejection(client.plan({ model: "x", signal: controller.signal }));
    expect(aborted.code).toBe("cancelled");
    expect(aborted.message).toContain("before it was sent");
  });
});

describe("client.sessions.search", () => {
  test("a search the host aborts is cancelled on the core's side (the protocol's table: cancellable)", async () => {
    const client = await startFake();
    expect(await echo(client.sessions.search({ query: "tea" }))).toEqual({
      method: "sessions.search",
      params: { query: "tea" },
    });
    const controller = new AbortController();
    const search = client.sessions.search({ query: "hang" }, { signal: controller.signal });
    expect(await hanging(client)).toHaveLength(1);
    controller.abort();
    expect((await rejection(search)).code).toBe("cancelled");
    expect(await hanging(client)).toEqual([]);
  });
});

describe("client.sessions.search, aborted as its answer comes", () => {
  // A host searching as its user types aborts the last search and sends the next: the core had
  // answered the aborted one as the cancel crossed it, and the abort resolved with its stale hits.
  test("a search the host aborted rejects cancelled, even when the core answered it first", async () => {
    const client = await startFake();
    const controller = new AbortController();
    const search = client.sessions.search({ query: "crossing" }, { signal: controller.signal });
    // The core has read it.
    await client.request("hanging");
    controller.abort();
    expect((await rejection(search)).code).toBe("cancelled");
  });
});
