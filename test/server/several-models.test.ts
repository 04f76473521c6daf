import { describe, expect, test } from "bun:test";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { PinnedSetProblem } from "../../src/models/pinned-set.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import type { EmbedDeadline } from "../../src/server/watched-embed.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { FakeFleet, signal } from "../runtime/helpers/fake-model-runtime.ts";
import { rejection } from "../runtime/helpers/harness.ts";

// SeveralModels over fake runtimes (docs/supervisor.md "Scheduling several models"): what it adds
// to the scheduler — the pinned set's check before the first load, and shutdown's refusal.

const GIB = 1024 ** 3;
const config = ConfigSchema.parse({
  model: { path: "/m/default.gguf" },
  models: [
    { name: "a", path: "/m/a.gguf", pin: true },
    { name: "b", path: "/m/b.gguf", pin: true },
  ],
});
const overBudget: PinnedSetProblem = {
  models: ["a", "b"],
  devices: [{ device: "gpu0", needed_bytes: 12 * GIB, budget_bytes: 10 * GIB }],
};

/** Over a 10 GiB gpu0 that holds `a` and `b` together: the pinned check's answer is the fake's. */
function setup(problem: PinnedSetProblem | null) {
  const fleet = new FakeFleet({ default: { gib: 1 }, a: { gib: 4 }, b: { gib: 4 } });
  let checks = 0;
  const several = new SeveralModels({
    config: () => config,
    reuse: () => ({}) as PromptReuse,
    plan: () => Promise.reject(new Error("the fakes plan themselves")),
    pinnedProblem: async () => {
      checks += 1;
      return problem;
    },
    runtime: fleet.runtime,
  });
  return { fleet, several, checks: () => checks };
}

/** One model named by its address (the fake runtime's lease points there), served over a fake fleet. */
function atAddress(name: string, embedDeadline?: EmbedDeadline) {
  const fleet = new FakeFleet({ [name]: { gib: 1 } });
  const several = new SeveralModels({
    config: () => config,
    reuse: () => ({}) as PromptReuse,
    plan: () => Promise.reject(new Error("the fakes plan themselves")),
    pinnedProblem: async () => null,
    runtime: fleet.runtime,
    ...(embedDeadline ? { embedDeadline } : {}),
  });
  return { fleet, several, name };
}

describe("SeveralModels", () => {
  test("a pinned set over the budget: the first load is refused model_plan_error naming the models, nothing starts", async () => {
    const { fleet, several, checks } = setup(overBudget);
    const err = await rejection(several.provider({ kind: "path", name: "default" }).acquire(signal()));
    expect(err.code).toBe("model_plan_error");
    expect(err.message).toContain("a, b");
    expect(err.data).toMatchObject({ models: ["a", "b"], devices: overBudget.devices });
    const again = await rejection(several.scheduler.load("a"));
    expect(again.code).toBe("model_plan_error");
    expect(fleet.log.filter((l) => l.endsWith(".start"))).toEqual([]);
    // A refusal is not kept: the budget was the memory free then, so each load checks again.
    expect(checks()).toBe(2);
  });

  test("a pinned set over the budget only for a while (memory another program held): a later load checks again and goes ahead", async () => {
    const fleet = new FakeFleet({ default: { gib: 1 }, a: { gib: 4 }, b: { gib: 4 } });
    const answers: (PinnedSetProblem | null)[] = [overBudget, null];
    const several = new SeveralModels({
      config: () => config,
      reuse: () => ({}) as PromptReuse,
      plan: () => Promise.reject(new Error("the fakes plan themselves")),
      pinnedProblem: async () => answers.shift() ?? null,
      runtime: fleet.runtime,
    });
    expect((await rejection(several.scheduler.load("a"))).code).toBe("model_plan_error");
    await several.scheduler.load("a");
    expect(fleet.log.filter((l) => l.endsWith(".start"))).toEqual(["a.start"]);
    expect(several.scheduler.snapshot().models.find((m) => m.name === "a")?.state).toBe("loaded");
  });

  test("a pinned set that fits: loads go ahead, checked once", async () => {
    const { fleet, several, checks } = setup(null);
    (await several.provider({ kind: "path", name: "a" }).acquire(signal())).release();
    (await several.provider({ kind: "path", name: "b" }).acquire(signal())).release();
    expect(fleet.log).toEqual(["a.start", "b.start"]);
    expect(checks()).toBe(1);
  });

  /** `a` loaded, its runtime's snapshot naming its file and, where `over` says, its server's own state. */
  async function listed(
    spec: { gib: number; saveGate?: Promise<void> },
    over: () => object | null = () => null,
  ) {
    const fleet = new FakeFleet({ a: spec });
    const several = new SeveralModels({
      config: () => config,
      reuse: () => ({}) as PromptReuse,
      plan: () => Promise.reject(new Error("the fakes plan themselves")),
      pinnedProblem: async () => null,
      runtime: (name) => {
        const r = fleet.runtime(name);
        const snap = r.snapshot.bind(r);
        r.snapshot = () =>
          ({ ...snap(), model: { path: `/m/${name}.gguf` }, ...over() }) as ReturnType<typeof snap>;
        return r;
      },
    });
    const a = {
      kind: "configured",
      name: "a",
      model: { name: "a", kind: "chat", pin: true, path: "/m/a.gguf" },
    } as const;
    await several.load(a, { pin: undefined, signal: signal(), onProgress: () => {} });
    expect(several.loadedPaths()).toEqual(["/m/a.gguf"]);
    const stateOfA = () => several.status().models.find((m) => m.name === "a")?.state;
    return { several, a, stateOfA };
  }

  test("the listing's loaded files: a model serving now, not one whose server is being unloaded", async () => {
    const save = Promise.withResolvers<void>();
    const { several, a, stateOfA } = await listed({ gib: 1, saveGate: save.promise });
    // Its sessions being saved before its stop: the host's picker must not offer it as loaded.
    const unloaded = several.unload(a, { force: false });
    expect(stateOfA()).toBe("unloaded");
    expect(several.loadedPaths()).toEqual([]);
    save.resolve();
    await unloaded;
    await several.stop();
  });

  test("the listing's loaded files agree with status: a loaded model whose server crashed is not serving", async () => {
    // Its own supervisor's view once loaded: its server died and is being restarted (a lease out).
    let down: { state: string; lastError: string } | null = null;
    const { several, stateOfA } = await listed({ gib: 1 }, () => down);
    down = { state: "starting", lastError: "llama-server exited with code 139" };
    expect(stateOfA()).toBe("restarting");
    expect(several.loadedPaths()).toEqual([]);
    down = null;
    expect(several.loadedPaths()).toEqual(["/m/a.gguf"]);
    // Dead with no lease out: the scheduler calls it failed as it next looks, the listing too.
    down = { state: "stopped", lastError: "llama-server exited with code 139" };
    expect(stateOfA()).toBe("failed");
    expect(several.loadedPaths()).toEqual([]);
    await several.stop();
  });

  test("a model's provider opens a connection ahead only to that model's server, once it serves", async () => {
    const { several } = setup(null);
    const a = several.provider({ kind: "path", name: "a" });
    expect(a.connectAhead?.()).toBeUndefined();
    (await a.acquire(signal())).release();
    expect(a.connectAhead?.() as unknown).toBe("spare of a");
    expect(several.provider({ kind: "path", name: "b" }).connectAhead?.()).toBeUndefined();
  });

  test("a load while shutting down is refused cancelled, and starts nothing", async () => {
    const { fleet, several } = setup(null);
    (await several.provider({ kind: "path", name: "a" }).acquire(signal())).release();
    const stopping = several.stop();
    const load = await rejection(
      several.load({ kind: "path", name: "b" }, { pin: undefined, signal: signal(), onProgress: () => {} }),
    );
    expect(load.code).toBe("cancelled");
    const chat = await rejection(several.provider({ kind: "path", name: "b" }).acquire(signal()));
    expect(chat.code).toBe("cancelled");
    await stopping;
    expect(fleet.log).toEqual(["a.start", "a.stop"]);
  });

  test("shutdown saves every model's sessions at once, refusing loads meanwhile, then stops the servers: its time is one save's, not one per model", async () => {
    const fleet = new FakeFleet({ a: { gib: 4 }, b: { gib: 4 } });
    const saves: string[] = [];
    const gate = Promise.withResolvers<void>();
    const several = new SeveralModels({
      config: () => config,
      // Each save may take its STOP_SAVE_MS (a slow disk, a busy server): here until the gate opens.
      reuse: (model) =>
        ({
          stop: async () => {
            saves.push(model);
            await gate.promise;
          },
        }) as unknown as PromptReuse,
      plan: () => Promise.reject(new Error("the fakes plan themselves")),
      pinnedProblem: async () => null,
      runtime: fleet.runtime,
    });
    for (const name of ["a", "b"]) {
      (await several.provider({ kind: "path", name }).acquire(signal())).release();
      several.promptReuse(name);
    }
    const stopping = several.stop();
    await Bun.sleep(10);
    expect(saves).toEqual(["a", "b"]);
    // Loads are refused while the saves run: a server started now would only be stopped again.
    const late = await rejection(several.provider({ kind: "path", name: "default" }).acquire(signal()));
    expect(late.code).toBe("cancelled");
    expect(fleet.log).toEqual(["a.start", "b.start"]);
    gate.resolve();
    await stopping;
    expect(fleet.log.slice(2).sort()).toEqual(["a.stop", "b.stop"]);
  });

  test("a chat's signal makes it its model's user at once: unload is refused until it ends; force aborts it", async () => {
    const { several } = setup(null);
    const a = { kind: "path", name: "a" } as const;
    await several.load(a, { pin: undefined, signal: signal(), onProgress: () => {} });
    const watch = several.chatSignal(a, signal());
    const err = await rejection(several.unload(a, { force: false }));
    expect(err.data).toMatchObject({ reason: "model_busy", model: "a" });
    watch.done();
    expect(await several.unload(a, { force: false })).toEqual({ model: "a", unloaded: true });
    await several.load(a, { pin: undefined, signal: signal(), onProgress: () => {} });
    const forced = several.chatSignal(a, signal());
    expect(await several.unload(a, { force: true })).toEqual({ model: "a", unloaded: true });
    expect(forced.signal.aborted).toBe(true);
    forced.done();
  });

  test("an embed whose model fails to load ends its claim: the model is not left busy", async () => {
    const { fleet, several } = setup(null);
    fleet.spec("a").fail = new Error("it does not start");
    const a = { kind: "path", name: "a" } as const;
    await rejection(several.embed(a, ["x"], signal()));
    expect(several.scheduler.snapshot().models.find((m) => m.name === "a")?.chats).toBe(0);
  });

  test("a model whose load failed tells its failure (status's `llama` for `default`); an unknown one none", async () => {
    const { fleet, several } = setup(null);
    fleet.spec("a").fail = new CoreError("model_missing", "model.path: /a.gguf does not exist");
    fleet.spec("b").fail = new Error("it does not start");
    for (const name of ["a", "b"])
      await rejection(several.embed({ kind: "path", name } as const, ["x"], signal()));
    expect(several.failure("a")).toEqual({
      code: "model_missing",
      message: "model.path: /a.gguf does not exist",
    });
    expect(several.failure("b")).toEqual({
      code: "internal_error",
      message: 'model "b" failed: it does not start',
    });
    expect(several.failure("nothing")).toBeUndefined();
  });

  test("a chat on a path that fails to load leaves nothing behind: 1,000 distinct paths keep no provider, reuse or chat set", async () => {
    const { several } = setup(null);
    const before = several.kept;
    for (let i = 0; i < 1000; i++) {
      // A path the fleet cannot make (a missing file, a refused one): the chat's way through it.
      const model = { kind: "path", name: `/nowhere/${i}.gguf` } as const;
      const provider = several.provider(model);
      const watch = several.chatSignal(model, signal());
      several.promptReuse(model.name);
      await rejection(provider.acquire(watch.signal));
      watch.done();
    }
    const embeds = Array.from(
      { length: 50 },
      (_, i) => ({ kind: "path", name: `/nowhere/e${i}.gguf` }) as const,
    );
    for (const model of embeds) await rejection(several.embed(model, ["x"], signal()));
    expect(several.kept).toBe(before);
    expect(several.scheduler.snapshot().models.map((m) => m.name)).toEqual(["default", "a", "b"]);
  });

  test("a path that served keeps its prompt reuse (its records), and a configured model keeps its own, used or not", async () => {
    const fleet = new FakeFleet({ default: { gib: 1 }, "/m/c.gguf": { gib: 1 } });
    const made: string[] = [];
    const several = new SeveralModels({
      config: () => config,
      reuse: (model) => {
        made.push(model);
        return {} as PromptReuse;
      },
      plan: () => Promise.reject(new Error("the fakes plan themselves")),
      pinnedProblem: async () => null,
      runtime: fleet.runtime,
    });
    for (const name of ["/m/c.gguf", "a"]) {
      const model = { kind: "path", name } as const;
      const watch = several.chatSignal(model, signal());
      several.promptReuse(name);
      if (name === "/m/c.gguf") (await several.provider(model).acquire(watch.signal)).release();
      watch.done();
    }
    await several.unload({ kind: "path", name: "/m/c.gguf" }, { force: false });
    several.status();
    // Asked again: the same objects, not new ones.
    several.promptReuse("/m/c.gguf");
    several.promptReuse("a");
    expect(made).toEqual(["/m/c.gguf", "a"]);
  });

  test("an embedding server that fails says so: internal_error with its reason, not 'see the core's log'; an input it cannot embed is named", async () => {
    // A model named by its address: the fake runtime's lease points there.
    const answers = [
      new Response('{"error":{"code":500,"message":"out of memory","type":"server_error"}}', { status: 500 }),
      new Response(
        JSON.stringify({
          data: [
            { index: 0, embedding: Buffer.from(new Float32Array([Number.NaN, 0]).buffer).toString("base64") },
          ],
        }),
      ),
      // The first input alone, 1,024 numbers wide: a list of 1,200 would be a 50 MB answer line.
      new Response(
        JSON.stringify({
          data: [{ index: 0, embedding: Buffer.from(new Float32Array(1024).buffer).toString("base64") }],
        }),
      ),
    ];
    // Its /props unread (no context known): each embedding request gets the next answer.
    using server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req) =>
        new URL(req.url).pathname === "/props"
          ? new Response("", { status: 404 })
          : (answers.shift() as Response),
    });
    const { fleet, several, name } = atAddress(`127.0.0.1:${server.port}`);
    const model = { kind: "path", name } as const;
    const failed = await rejection(several.embed(model, ["x"], signal()));
    expect(failed.code).toBe("internal_error");
    expect(failed.message).toContain("HTTP 500: out of memory");
    expect(failed.data).toMatchObject({ reason: "server_error" });
    // Reported as a chat's 5xx is: the supervisor restarts the server on the next use.
    expect(fleet.last(name).failures).toEqual(["llama-server answered HTTP 500: out of memory"]);
    const nan = await rejection(several.embed(model, ["x"], signal()));
    expect(nan.code).toBe("invalid_request");
    expect(nan.data).toMatchObject({ field: "input.0", index: 0 });
    const many = await rejection(several.embed(model, Array(1200).fill("x"), signal()));
    expect(many.code).toBe("invalid_request");
    expect(many.data).toMatchObject({ field: "input", max_inputs: 1175, dimensions: 1024 });
  });

  test("an embedding server that stops answering: the request ends past its deadline as a chat's wedge, the server is reported for a restart, the lease goes back", async () => {
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    try {
      // A model named by its address: the fake runtime's lease points at the stand-in.
      const asked: [number, number][] = [];
      // The deadline short for the wedged request only; what it is made of is embed-budget's
      // (test/llama/embeddings.test.ts). The later embed must be answered: a real stand-in on a
      // loaded box can take past tens of ms, so it gets a long one.
      const { fleet, several, name } = atAddress(
        standIn.baseUrl.replace("http://", ""),
        (tokens, floorMs) => {
          asked.push([tokens, floorMs]);
          return asked.length === 1 ? 30 : 60_000;
        },
      );
      const model = { kind: "path", name } as const;
      standIn.model.embedWedges = 1;
      const wedged = await rejection(several.embed(model, ["hello world"], signal()));
      expect(wedged.code).toBe("internal_error");
      expect(wedged.message).toStartWith(
        "llama-server stopped responding: no answer in 0 s to an embedding request of 1 input",
      );
      expect(wedged.data).toMatchObject({ reason: "server_failed" });
      // "hello world": 11 bytes and its two markers, under a floor of llama.request_timeout_s.
      expect(asked).toEqual([[13, 1000]]);
      const runtime = fleet.last(name);
      expect(runtime.failures).toHaveLength(1);
      expect(runtime.failures[0]).toContain("no answer in 0 s");
      expect(runtime.leases).toBe(0);
      // Not busy: a plain unload goes ahead; the next embed is served.
      expect(await several.unload(model, { force: false })).toMatchObject({ unloaded: true });
      const again = await several.embed(model, ["hello world"], signal());
      expect(again.embeddings).toHaveLength(1);
      expect(asked).toHaveLength(2);
      expect(runtime.failures).toHaveLength(1);
    } finally {
      standIn.stop();
    }
  });

  // llama-server queues a request's inputs behind those before it: a deadline over its own tokens
  // alone called the last of several honest requests on a slow CPU a wedge, and the restart ended all.
  test("an embedding request's deadline counts the requests in flight before it on the same server", async () => {
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    try {
      const asked: number[] = [];
      const first = Promise.withResolvers<void>();
      const { fleet, several, name } = atAddress(standIn.baseUrl.replace("http://", ""), (tokens) => {
        asked.push(tokens);
        first.resolve();
        return 60_000;
      });
      const model = { kind: "path", name } as const;
      // The first is never answered: it stays in flight while the second is sent.
      standIn.model.embedWedges = 1;
      const cancel = new AbortController();
      const held = rejection(several.embed(model, ["hello world"], cancel.signal));
      await first.promise;
      const second = await several.embed(model, ["hello there"], signal());
      expect(second.embeddings).toHaveLength(1);
      // "hello world" (13 estimated) ahead of "hello there" (13).
      expect(asked).toEqual([13, 26]);
      cancel.abort();
      expect(((await held) as unknown as Error).name).toBe("AbortError");
      // Ended requests are no longer counted ahead of a later one.
      await several.embed(model, ["hello world"], signal());
      expect(asked).toEqual([13, 26, 13]);
      expect(fleet.last(name).failures).toEqual([]);
    } finally {
      standIn.stop();
    }
  });
});
