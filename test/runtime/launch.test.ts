import { describe, expect, spyOn, test } from "bun:test";
import { Launch } from "../../src/runtime/launch.ts";
import { closeTcpServers, tcpServer } from "../fixtures/tcp-server.ts";

// One running llama-server as one object (docs/supervisor.md "A launch"): its identity, its
// idle sleep over its one slot table, and its end.

const endpoint = { baseUrl: "http://127.0.0.1:9", apiKey: "k" };
const never = () => new AbortController().signal;

/** A launch whose child tells its sleep (child mode): `heard` drives it, a wake is one `rouse`. */
function sleepy() {
  const calls = { rouses: 0 };
  const launch = new Launch({
    ...endpoint,
    slots: 2,
    sleep: {
      idleMs: 1000,
      pushed: true,
      isAsleep: async () => null,
      rouse: async () => {
        calls.rouses++;
      },
    },
  });
  return { launch, calls };
}

describe("Launch", () => {
  test("each launch has its own id; its epoch is the id until a sleep empties its slots", () => {
    const a = new Launch({ ...endpoint, slots: 1 });
    const b = new Launch({ ...endpoint, slots: 1 });
    expect(a.id).not.toBe(b.id);
    expect(a.epoch).toBe(`${a.id}#0`);
    expect(a.awake).toBe(true);
    expect(a.thinking).toBeUndefined();
  });

  test("a sleep learned: asleep, counted in its epoch, every slot's holder gone; a lease wakes it", async () => {
    const { launch, calls } = sleepy();
    const pick = launch.slots.take("u/a", 1)!;
    launch.slots.release(pick.slot, "u/a", true, 1);
    launch.heard("sleeping");
    expect(launch.sleepPhase).toBe("asleep");
    expect(launch.awake).toBe(false);
    expect(launch.sleeps).toBe(1);
    expect(launch.epoch).toBe(`${launch.id}#1`);
    expect(launch.slots.holderOf(pick.slot)).toBeUndefined();
    expect(launch.slots.dirty()).toEqual([]);
    await launch.admit(never());
    await launch.wake(never());
    expect(calls.rouses).toBe(1);
    expect(launch.awake).toBe(true);
    expect(launch.slots.leases).toBe(1);
    launch.leave();
    launch.leave();
    expect(launch.slots.leases).toBe(0);
    launch.end();
  });

  test("leases are counted once, in its slot table, whoever holds them", async () => {
    const launch = new Launch({ ...endpoint, slots: 2 });
    await launch.admit(never());
    await launch.admit(never());
    expect(launch.slots.leases).toBe(2);
    expect(launch.slots.idle()).toBe(false);
    launch.leave();
    launch.leave();
    expect(launch.slots.idle()).toBe(true);
  });

  test("end: `died` aborts once, with the first reason; it is no longer awake", () => {
    const launch = new Launch({ ...endpoint, slots: 1 });
    launch.end();
    expect(launch.died.aborted).toBe(false);
    launch.end(new Error("crashed"));
    launch.end(new Error("stopped"));
    expect(launch.died.aborted).toBe(true);
    expect((launch.died.reason as Error).message).toBe("crashed");
    expect(launch.awake).toBe(false);
  });

  test("a `died` controller another owns (a stand-in) is the launch's", () => {
    const died = new AbortController();
    const launch = new Launch({ ...endpoint, slots: 1, died });
    died.abort(new Error("gone"));
    expect(launch.died.aborted).toBe(true);
    expect(launch.awake).toBe(false);
  });

  test("its end answers the callers in line for a slot: not admitted (they start again)", async () => {
    const launch = new Launch({ ...endpoint, slots: 1 });
    await launch.admit(never());
    const waiting = launch.admit(never());
    launch.end(new Error("crashed"));
    expect(await waiting).toBe(false);
    expect((launch.died.reason as Error).message).toBe("crashed");
    expect(launch.slots.leases).toBe(1);
  });

  test("/props is read once: an early read and the first chat's share one request; a caller giving up gets undefined", async () => {
    let requests = 0;
    const gate = Promise.withResolvers<void>();
    using server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async () => {
        requests++;
        await gate.promise;
        return Response.json({ default_generation_settings: { n_ctx: 4096 }, total_slots: 1 });
      },
    });
    const launch = new Launch({ baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "k", slots: 1 });
    launch.readPropsEarly();
    const gaveUp = new AbortController();
    const impatient = launch.contextSize(gaveUp.signal);
    const patient = launch.contextSize(never());
    gaveUp.abort(new Error("cancelled"));
    expect(await impatient).toBeUndefined();
    gate.resolve();
    expect(await patient).toBe(4096);
    expect(await launch.contextSize(never())).toBe(4096);
    expect(requests).toBe(1);
  });

  test("connectAhead: no more spares waiting than free slots; one taken or dropped frees its place; none asleep or ended", async () => {
    const { baseUrl } = await tcpServer(() => {});
    const launch = new Launch({ baseUrl, apiKey: "k", slots: 2 });
    const a = launch.connectAhead();
    const b = launch.connectAhead();
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(launch.connectAhead()).toBeUndefined();
    a?.close();
    const c = launch.connectAhead();
    expect(c).toBeDefined();
    // Taken by a request (its lease now holds the slot): its place is the lease's.
    await launch.admit(never());
    expect(b?.take(launch, handlers(), () => {})).toBe(true);
    expect(launch.connectAhead()).toBeUndefined();
    launch.leave();
    const d = launch.connectAhead();
    expect(d).toBeDefined();
    for (const s of [c, d]) s?.close();
    launch.end(new Error("gone"));
    expect(launch.connectAhead()).toBeUndefined();
    const { launch: sleeping } = sleepy();
    sleeping.heard("sleeping");
    expect(sleeping.connectAhead()).toBeUndefined();
    sleeping.end();
    closeTcpServers();
  });

  test("a spare asks whether its server runs as it is taken, unless the lease's look just did, after it opened", async () => {
    const { baseUrl } = await tcpServer(() => {});
    let asked = 0;
    let runs = true;
    const launch = new Launch({
      baseUrl,
      apiKey: "k",
      slots: 1,
      running: () => {
        asked++;
        return runs;
      },
    });
    const take = () => launch.connectAhead()?.take(launch, handlers(), () => {});
    expect(take()).toBe(true);
    expect(asked).toBe(1);
    // The lease's look (supervisor.ts `usable`) came after the spare opened: no second look.
    const spare = launch.connectAhead();
    launch.noteRunning();
    expect(spare?.take(launch, handlers(), () => {})).toBe(true);
    expect(asked).toBe(1);
    // A look made before the spare opened says nothing of it.
    expect(take()).toBe(true);
    expect(asked).toBe(2);
    // Nor does one older than a few milliseconds.
    const late = launch.connectAhead();
    launch.noteRunning();
    await Bun.sleep(20);
    expect(late?.take(launch, handlers(), () => {})).toBe(true);
    expect(asked).toBe(3);
    runs = false;
    expect(take()).toBe(false);
    expect(asked).toBe(4);
    launch.end(new Error("gone"));
    closeTcpServers();
  });
});

/** Handlers that ignore everything: the test only counts places. */
function handlers() {
  const nothing = () => {};
  return { open: nothing, drain: nothing, data: nothing, close: nothing, error: nothing };
}

describe("Launch: its files' check begun with a connection ahead", () => {
  test("taken once while fresh; it says what changed; none without files", async () => {
    const { mkdtempSync, renameSync, rmSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const { fileIdentity } = await import("../../src/util/file-identity.ts");
    const dir = mkdtempSync(join(tmpdir(), "launch-ahead-"));
    try {
      const model = join(dir, "model.gguf");
      writeFileSync(model, "v1");
      const { baseUrl } = await tcpServer(() => {});
      const launch = new Launch({
        baseUrl,
        apiKey: "k",
        slots: 4,
        files: { model: fileIdentity(model), projector: undefined },
      });
      launch.connectAhead()?.close();
      const taken = launch.takeFilesAhead();
      expect(taken).toBeDefined();
      expect(await taken).toBeUndefined();
      expect(launch.takeFilesAhead()).toBeUndefined();
      writeFileSync(`${model}.new`, "v2");
      renameSync(`${model}.new`, model);
      launch.connectAhead()?.close();
      expect(await launch.takeFilesAhead()).toBe("the model file");
      // Older than a chat's way to its first save or restore: asked anew.
      launch.connectAhead()?.close();
      const later = performance.now() + 1001;
      const clock = spyOn(performance, "now").mockImplementation(() => later);
      try {
        expect(launch.takeFilesAhead()).toBeUndefined();
      } finally {
        clock.mockRestore();
      }
      const bare = new Launch({ baseUrl, apiKey: "k", slots: 1 });
      bare.connectAhead()?.close();
      expect(bare.takeFilesAhead()).toBeUndefined();
      launch.end();
      bare.end();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
