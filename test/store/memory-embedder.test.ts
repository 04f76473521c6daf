import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { MemoryEmbedder } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

function remember(store: Store, user: string, session: string, text: string): void {
  store.conversations.commitTurn({
    userId: user,
    sessionId: session,
    agent: "a",
    messages: [{ role: "user", content: text }],
    memoryText: text,
    at: new Date(),
  });
}

/** A model that answers each text with a vector of its length and first letter, recording each request. */
function fakeModel() {
  const requests: string[][] = [];
  let failing: Error | undefined;
  return {
    requests,
    fail(err: Error | undefined) {
      failing = err;
    },
    embed: async (texts: string[], signal: AbortSignal) => {
      signal.throwIfAborted();
      requests.push([...texts]);
      if (failing) throw failing;
      return texts.map((t) => {
        const v = [t.length, t.charCodeAt(0) || 1, 1];
        const n = Math.hypot(...v);
        return v.map((x) => x / n);
      });
    },
  };
}

function embedder(store: Store, model: ReturnType<typeof fakeModel>, fp = { value: "m1" }) {
  return new MemoryEmbedder({
    store,
    model: "embed",
    fingerprint: () => fp.value,
    embed: model.embed,
    batch: 2,
    settleMs: 1,
    retryMs: { initial: 20, max: 40 },
  });
}

describe("MemoryEmbedder", () => {
  test("embeds every row without a vector, newest first, in batches; status counts them", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["a one", "b two", "c three"]) remember(store, "ann", "s", t);
    const model = fakeModel();
    const job = embedder(store, model);
    expect(job.progress()).toEqual({
      embedded: 0,
      total: 0,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    await job.run();
    expect(model.requests).toEqual([["c three", "b two"], ["a one"]]);
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 3, total: 3 });
    expect(job.progress()).toEqual({
      embedded: 3,
      total: 3,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    // Nothing left: another run sends nothing.
    await job.run();
    expect(model.requests).toHaveLength(2);
    await job.stop();
    store.close();
  });

  test("a new row after the rest are embedded is embedded without a pass over every older row", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (let i = 0; i < 6; i++) remember(store, "ann", "s", `old ${i}`);
    const model = fakeModel();
    const job = embedder(store, model);
    await job.run();
    remember(store, "ann", "s", "new one");
    // Each look for rows without a vector, and where it began: one below the new row read every
    // older row to find none (90 ms a chat at 90,000 rows).
    const looks: (number | undefined)[] = [];
    const lacking = store.memory.vectors.lacking.bind(store.memory.vectors);
    store.memory.vectors.lacking = (fp, n, ids, below) => {
      if (!ids) looks.push(below);
      return lacking(fp, n, ids, below);
    };
    await job.run();
    expect(model.requests.at(-1)).toEqual(["new one"]);
    expect(looks).toEqual([undefined]);
    expect(job.progress()).toMatchObject({ embedded: 7, total: 7 });
    await job.stop();
    store.close();
  });

  test("a changed model embeds everything again; the old model's vectors are not used", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    remember(store, "ann", "s", "alpha");
    const model = fakeModel();
    const fp = { value: "m1" };
    const job = embedder(store, model, fp);
    await job.run();
    fp.value = "m2";
    await job.run();
    expect(model.requests).toEqual([["alpha"], ["alpha"]]);
    expect(store.memory.vectors.counts("m1").embedded).toBe(0);
    expect(store.memory.vectors.counts("m2").embedded).toBe(1);
    const q = await job.queryVector("alpha", new AbortController().signal);
    expect(q?.fingerprint).toBe("m2");
    expect(store.memory.search("ann", "zzz", 1, "", q)).toHaveLength(1);
    await job.stop();
    store.close();
  });

  test("a failing model leaves words working and is tried again with back-off", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    remember(store, "ann", "s", "kiwi fruit");
    const model = fakeModel();
    model.fail(new CoreError("internal_error", "llama-server crashed"));
    const job = embedder(store, model);
    await job.run();
    expect(store.memory.vectors.counts("m1").embedded).toBe(0);
    expect(store.memory.search("ann", "kiwi", 1)).toHaveLength(1);
    model.fail(undefined);
    await waitFor(() => store.memory.vectors.counts("m1").embedded === 1, { timeoutMs: 5000 });
    expect(model.requests.length).toBeGreaterThanOrEqual(2);
    await job.stop();
    store.close();
  });

  test("an input the server finds too long is shortened by the ratio it gives and sent again", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    remember(store, "ann", "s", "x".repeat(1000));
    const model = fakeModel();
    const job = new MemoryEmbedder({
      store,
      model: "embed",
      fingerprint: () => "m1",
      embed: async (texts, signal) => {
        const long = texts.findIndex((t) => t.length > 500);
        if (long >= 0)
          throw new CoreError("invalid_request", "too long", {
            field: `input.${long}`,
            index: long,
            n_tokens: 1000,
            max_tokens: 500,
          });
        return model.embed(texts, signal);
      },
    });
    await job.run();
    expect(model.requests).toEqual([["x".repeat(450)]]);
    expect(store.memory.vectors.counts("m1").embedded).toBe(1);
    await job.stop();
    store.close();
  });

  test("embedChunks embeds the rows given with progress; a failure resolves, a cancel rejects", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["p1", "p2", "p3", "other"]) remember(store, "ann", "s", t);
    const ids = store.memory
      .search("ann", "p1 p2 p3", 10)
      .map((h) => Number(h.doc.id))
      .sort((a, b) => a - b);
    expect(ids).toHaveLength(3);
    const model = fakeModel();
    const job = embedder(store, model);
    const progress: [number, number][] = [];
    await job.embedChunks(ids, (d, t) => progress.push([d, t]), new AbortController().signal);
    expect(progress).toEqual([
      [0, 3],
      [2, 3],
      [3, 3],
    ]);
    expect(model.requests.flat().sort()).toEqual(["p1", "p2", "p3"]);
    // Already embedded: reported done at once, nothing sent.
    const again: [number, number][] = [];
    await job.embedChunks(ids, (d, t) => again.push([d, t]), new AbortController().signal);
    expect(again).toEqual([[3, 3]]);
    // The model failing: resolved all the same (the job tries later).
    const failing = fakeModel();
    failing.fail(new Error("down"));
    const job2 = embedder(store, failing, { value: "m2" });
    await job2.embedChunks(ids, () => {}, new AbortController().signal);
    expect(store.memory.vectors.counts("m2").embedded).toBe(0);
    const cancel = new AbortController();
    cancel.abort(new CoreError("cancelled", "cancelled"));
    await expect(job2.embedChunks(ids, () => {}, cancel.signal)).rejects.toMatchObject({ code: "cancelled" });
    await job.stop();
    await job2.stop();
    store.close();
  });
});

describe("an erase while rows are being embedded", () => {
  test("a row erased mid-request gets no vector, nor does a new row that took its id", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    remember(store, "alice", "a", "alice SECRET");
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const model = fakeModel();
    const job = new MemoryEmbedder({
      store,
      model: "embed",
      fingerprint: () => "m1",
      embed: async (texts, signal) => {
        await held;
        return model.embed(texts, signal);
      },
    });
    const running = job.run();
    await Bun.sleep(20);
    await store.deleteUser("alice");
    // Bob's turn takes the freed id (the highest was alice's).
    remember(store, "bob", "b", "bob's own words");
    release();
    await running;
    expect(model.requests).toEqual([["alice SECRET"], ["bob's own words"]]);
    // Bob's row has the vector of his own words, not alice's (the fake model's vector of a text).
    const [bobs] = await model.embed(["bob's own words"], new AbortController().signal);
    const near = store.memory.vectors.nearest(
      { fingerprint: "m1", vector: bobs as number[] },
      { sql: "1", params: {}, owners: ["bob"] },
      1,
    );
    expect(near[0]?.score).toBeCloseTo(1, 6);
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 1, total: 1 });
    await job.stop();
    store.close();
  });
});

describe("a model that answers vectors of zeros", () => {
  // A reranker's server (`--reranking` or `--pooling rank` in a models entry's extra_args)
  // answers /v1/embeddings 200 with a vector of zeros (recording 118).
  test("its rows are set aside, not stored, and its query vector is not used", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["apples are red", "zebra crossing", "zinc oxide"]) remember(store, "ann", "s", t);
    const model = fakeModel();
    const job = new MemoryEmbedder({
      store,
      model: "embed",
      fingerprint: () => "m1",
      // Zeros for the texts that start with z, and for every query.
      embed: async (texts, signal) =>
        (await model.embed(texts, signal)).map((v, i) => (texts[i]?.startsWith("a") ? v : v.map(() => 0))),
      batch: 8,
      settleMs: 1,
    });
    await job.run();
    // Before the fix the zeros were kept as the rows' vectors, counted as embedded.
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 1, total: 1 });
    expect(job.progress()).toMatchObject({ set_aside: 2, last_set_aside: { reason: "no_vector" } });
    // A query of zeros is as near every row as any other: the newest rows in scope, whatever
    // they say, would be fused into every recall. Words alone instead.
    expect(await job.queryVector("zoo", new AbortController().signal)).toBeUndefined();
    await job.stop();
    store.close();
  });
});

describe("a model that changes while the job runs", () => {
  // A pull moved the hf: reference to another file, and the embedding server was started again
  // on it between two batches (evicted for a chat's room, or crashed): embedWith takes its
  // vectors, which are the new file's, while the run's fingerprint is the old file's.
  test("its vectors are not filed under the old fingerprint; the run starts over under the new", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["a one", "b two", "c three", "d four"]) remember(store, "ann", "s", t);
    const model = fakeModel();
    const fp = { value: "m1" };
    const job = new MemoryEmbedder({
      store,
      model: "embed",
      fingerprint: () => fp.value,
      embed: async (texts, signal) => {
        fp.value = "m2";
        return model.embed(texts, signal);
      },
      batch: 2,
      settleMs: 1,
    });
    await job.run();
    await waitFor(() => store.memory.vectors.counts("m2").embedded === 4, { timeoutMs: 5000 });
    // Before the fix the whole pass went on under m1: new weights' vectors filed as the old
    // model's, and every row embedded a second time by the next run.
    expect(store.memory.vectors.counts("m1").embedded).toBe(0);
    expect(model.requests.flat()).toHaveLength(6);
    // A query's vector is labelled with the model that made it, read once it came back.
    fp.value = "m3";
    expect((await job.queryVector("zoo", new AbortController().signal))?.fingerprint).toBe("m2");
    await job.stop();
    store.close();
  });
});
