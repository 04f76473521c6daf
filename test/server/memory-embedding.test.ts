import { describe, expect, spyOn, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { mkdirSync, renameSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import type { ModelChoice } from "../../src/config/choose-model.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { LaunchFiles, LaunchView } from "../../src/runtime/launch.ts";
import type { ModelsApi } from "../../src/runtime/models-api.ts";
import { embeddingFingerprintAsked, embedWith } from "../../src/server/memory-embedding.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { MemoryEmbedder } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { fileIdentity } from "../../src/util/file-identity.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { layRepo } from "../models/cache-layout.ts";
import { FakeFleet, signal } from "../runtime/helpers/fake-model-runtime.ts";

/** The fingerprint as the core takes it: each stat asked off the loop. */
const fingerprint = (path: string, args: readonly string[]) =>
  embeddingFingerprintAsked(path, args, new DriveAnswers());

describe("the embedding model's fingerprint", () => {
  test("the same file and flags give the same one; a file replaced or touched, or other flags, another", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const first = await fingerprint(path, []);
    expect(await fingerprint(path, [])).toBe(first);
    expect(await fingerprint(path, ["--pooling", "cls"])).not.toBe(first);
    utimesSync(path, new Date(1_000_000), new Date(2_000_000));
    const touched = await fingerprint(path, []);
    expect(touched).not.toBe(first);
    // Replaced in place by another file of the same size and time: another inode.
    const other = join(dir.path, "other.gguf");
    writeFileSync(other, "GGUF two");
    utimesSync(other, new Date(1_000_000), new Date(2_000_000));
    renameSync(other, path);
    expect(await fingerprint(path, [])).not.toBe(touched);
    // A path that cannot be read (an hf: reference not yet resolved) is keyed by the path itself.
    expect(await fingerprint("hf:org/model", [])).toBe(await fingerprint("hf:org/model", []));
  });
});

describe("the embedding model's fingerprint and the adapters its flags load", () => {
  test("a LoRA or control vector retrained in place (the same path) gives another fingerprint", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const lora = join(dir.path, "style.gguf");
    const cvec = join(dir.path, "calm.gguf");
    writeFileSync(lora, "LoRA one");
    writeFileSync(cvec, "cvec one");
    const retrain = (file: string, bytes: string) => {
      writeFileSync(`${file}.new`, bytes);
      renameSync(`${file}.new`, file);
    };
    for (const args of [
      ["--lora", lora],
      [`--lora-scaled=${lora}:0.5`],
      ["--control-vector-scaled", `${cvec}:0.8,${lora}:1`],
    ]) {
      const before = await fingerprint(path, args);
      expect(await fingerprint(path, args)).toBe(before);
      retrain(lora, "LoRA retrained");
      retrain(cvec, "cvec retrained");
      expect(await fingerprint(path, args)).not.toBe(before);
    }
    // Without any, the fingerprint is what it was before adapters counted: no row embedded again.
    const plain = createHash("sha256")
      .update(JSON.stringify({ model: fileIdentity(path), extraArgs: ["--pooling", "cls"] }))
      .digest("hex")
      .slice(0, 32);
    expect(await fingerprint(path, ["--pooling", "cls"])).toBe(plain);
  });
});

describe("the embedding model's fingerprint and flags that change no vector", () => {
  test("threads, placement, the server's own settings: the same vectors, the same fingerprint", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const base = await fingerprint(path, ["--pooling", "cls"]);
    // Before the fix each of these was another fingerprint: every row of memory embedded again.
    for (const extra of [
      ["--threads", "4"],
      ["-t", "8", "-tb", "8"],
      ["--pooling", "cls", "--threads", "4"],
      ["--threads=4"],
      ["-ngl", "99", "--no-mmap", "--port", "9000", "-np", "2", "--metrics"],
      ["-ub", "2048", "--ctx-size", "8192", "--log-disable", "--api-key", "k"],
    ]) {
      const args = extra[0] === "--pooling" ? extra : ["--pooling", "cls", ...extra];
      expect(await fingerprint(path, args)).toBe(base);
    }
  });

  test("a flag that changes the vectors, or another model, still gives another fingerprint", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const other = join(dir.path, "other.gguf");
    writeFileSync(other, "GGUF two");
    const base = await fingerprint(path, ["--threads", "4"]);
    expect(await fingerprint(other, ["--threads", "4"])).not.toBe(base);
    for (const changes of [
      ["--pooling", "mean"],
      ["--embd-normalize", "-1"],
      ["--attention", "causal"],
      ["--rope-freq-base", "20000"],
      ["--lora", "adapter.gguf"],
      ["-ctk", "q4_0"],
      ["--override-kv", "bert.pooling_type=int:1"],
      ["--some-flag-of-a-later-build", "1"],
    ]) {
      expect(await fingerprint(path, ["--threads", "4", ...changes])).not.toBe(base);
    }
  });
});

describe("the embedding model's fingerprint across an upgrade", () => {
  test("a path model whose flags hold no secret keeps the fingerprint it had: no re-embed", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const args = ["--pooling", "cls", "--model-url", "https://example.org/embed.gguf"];
    // How it was made before the hf: and secret changes (docs/agent.md "After an upgrade").
    const before = createHash("sha256")
      .update(JSON.stringify({ model: fileIdentity(path), extraArgs: args }))
      .digest("hex")
      .slice(0, 32);
    expect(await fingerprint(path, args)).toBe(before);
  });
});

describe("the embedding model's fingerprint and the secrets of its flags", () => {
  test("a key or token rotated in extra_args is the same model: its vectors are kept", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    // Before the fix each rotation was another fingerprint: every row of memory embedded again.
    const key = (k: string) => fingerprint(path, ["--api-key", k, `--hf-token=${k}`, "--pooling", "cls"]);
    expect(await key("old-secret")).toBe(await key("new-secret"));
    expect(await key("old-secret")).not.toBe(await fingerprint(path, ["--api-key", "x", "--hf-token=x"]));
  });
});

/** The Hugging Face cache at `cacheDir` as the core reads it (HF_HUB_CACHE), until disposed. */
function hubCacheAt(cacheDir: string): Disposable {
  const before = process.env.HF_HUB_CACHE;
  process.env.HF_HUB_CACHE = cacheDir;
  return {
    [Symbol.dispose]() {
      if (before === undefined) delete process.env.HF_HUB_CACHE;
      else process.env.HF_HUB_CACHE = before;
    },
  };
}

describe("the fingerprint of an embedding model given as an hf: reference", () => {
  test("follows the cached file it resolves to: a pull of another file is another model, a commit that keeps it is not", async () => {
    using dir = tmpdir();
    using _cache = hubCacheAt(dir.path);
    const ref = "hf:org/embed:Q8_0";
    layRepo(
      dir.path,
      "org/embed",
      { "embed-Q8_0.gguf": "GGUF one, 384 dimensions" },
      { commit: "a".repeat(40) },
    );
    const first = await fingerprint(ref, []);
    // `local-ai pull` of a newer revision: refs/main names a commit whose file is another.
    const b = layRepo(
      dir.path,
      "org/embed",
      { "embed-Q8_0.gguf": "GGUF two, 768 dimensions" },
      { commit: "b".repeat(40) },
    );
    // Before the fix both were keyed by the reference alone: the old model's vectors were
    // searched with the new model's queries, and never embedded again.
    const second = await fingerprint(ref, []);
    expect(second).not.toBe(first);
    // A later commit that leaves the file alone links the same blob: the same model.
    const c = join(b.root, "snapshots", "c".repeat(40));
    mkdirSync(c, { recursive: true });
    symlinkSync(join(b.snapshot, "embed-Q8_0.gguf"), join(c, "embed-Q8_0.gguf"));
    writeFileSync(join(b.root, "refs", "main"), "c".repeat(40));
    expect(await fingerprint(ref, [])).toBe(second);
  });
});

/** Models whose `embed` answers from `launch`'s server, and the models unloaded. */
function modelsOn(launch: LaunchView): { models: ModelsApi; unloaded: string[] } {
  const unloaded: string[] = [];
  const models = {
    embed: async (_m: ModelChoice, input: string[], _s: AbortSignal, onLaunch?: (l: LaunchView) => void) => {
      onLaunch?.(launch);
      return { dimensions: 2, embeddings: input.map(() => [1, 0]), usage: { prompt_tokens: 1 } };
    },
    unload: async (m: ModelChoice) => {
      unloaded.push(m.name);
      return { model: m.name, unloaded: true };
    },
  } as unknown as ModelsApi;
  return { models, unloaded };
}

describe("vectors from a server whose model file was replaced since it started", () => {
  test("are refused and the model unloaded, so none is kept under the new file's identity", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    // The server as the launcher made it: the file read just before its spawn.
    const launch = { files: { model: fileIdentity(path), projector: undefined } } as unknown as LaunchView;
    const { models, unloaded } = modelsOn(launch);
    const choice = { name: "embedder" } as ModelChoice;
    const signal = new AbortController().signal;
    expect(await embedWith(models, choice, ["a"], signal)).toEqual([[1, 0]]);
    expect(unloaded).toEqual([]);
    // A pull put a new file in place (a rename): the server still runs the old weights.
    writeFileSync(`${path}.new`, "GGUF two");
    renameSync(`${path}.new`, path);
    await expect(embedWith(models, choice, ["a"], signal)).rejects.toThrow(
      "changed since its server loaded it",
    );
    expect(unloaded).toEqual(["embedder"]);
  });
});

describe("vectors from a server started on an hf: reference that now resolves to another file", () => {
  test("are refused and the model unloaded: the fingerprint names the new file, the server runs the old", async () => {
    using dir = tmpdir();
    const ref = "hf:org/embed:Q8_0";
    const a = layRepo(dir.path, "org/embed", { "embed-Q8_0.gguf": "GGUF one" }, { commit: "a".repeat(40) });
    // The server as the launcher made it: the resolved snapshot file read just before its spawn.
    const started = fileIdentity(join(a.snapshot, "embed-Q8_0.gguf"));
    const launch = { files: { model: started, projector: undefined } } as unknown as LaunchView;
    const { models, unloaded } = modelsOn(launch);
    const choice = { name: "embedder" } as ModelChoice;
    const signal = new AbortController().signal;
    using _cache = hubCacheAt(dir.path);
    expect(await embedWith(models, choice, ["a"], signal, ref)).toEqual([[1, 0]]);
    // A pull of a newer revision: the old snapshot's file is still there, unchanged.
    layRepo(dir.path, "org/embed", { "embed-Q8_0.gguf": "GGUF two" }, { commit: "b".repeat(40) });
    await expect(embedWith(models, choice, ["a"], signal, ref)).rejects.toThrow(
      "changed since its server loaded it",
    );
    expect(unloaded).toEqual(["embedder"]);
  });
});

describe("a host's pin on the embedding model whose file was replaced", () => {
  test("outlives the restart memory's job makes: only the host's models.unload ends it", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    try {
      const files = () => ({ model: fileIdentity(path), projector: undefined });
      const { name, several, choice } = severalOn(standIn, undefined, files);
      const row = () => several.scheduler.snapshot().models.find((m) => m.name === name);
      await several.load(choice, { pin: true, signal: signal(), onProgress: () => {} });
      expect(row()?.pinned).toBe(true);
      writeFileSync(`${path}.new`, "GGUF two");
      renameSync(`${path}.new`, path);
      await expect(embedWith(several, choice, ["a"], signal())).rejects.toThrow("changed since");
      // Before the fix the restart was a models.unload: the host's pin was gone with it.
      expect(row()).toMatchObject({ state: "unloaded", pinned: true });
      expect(await embedWith(several, choice, ["a"], signal())).toHaveLength(1);
      expect(row()).toMatchObject({ state: "loaded", pinned: true });
    } finally {
      standIn.stop();
    }
  });
});

/** Several models over a fake runtime whose lease points at the stand-in (a model named by its address). */
function severalOn(standIn: LlamaStandIn, embedDeadline?: () => number, files?: () => LaunchFiles) {
  const name = standIn.baseUrl.replace("http://", "");
  const fleet = new FakeFleet({ [name]: { gib: 1, ...(files ? { files } : {}) } });
  const several = new SeveralModels({
    config: () => ConfigSchema.parse({ model: { path: "/m/chat.gguf" } }),
    reuse: () => ({}) as PromptReuse,
    plan: () => Promise.reject(new Error("the fakes plan themselves")),
    runtime: fleet.runtime,
    ...(embedDeadline ? { embedDeadline } : {}),
  });
  return { name, fleet, several, choice: { kind: "path", name } as ModelChoice };
}

/** Memory's job embedding through `several`, under the fingerprint "m1". */
function jobOn(
  store: Store,
  several: SeveralModels,
  name: string,
  choice: ModelChoice,
  retryMs: { initial: number; max: number },
): MemoryEmbedder {
  const embed = (texts: string[], s: AbortSignal) => embedWith(several, choice, texts, s);
  return new MemoryEmbedder({ store, model: name, fingerprint: () => "m1", embed, settleMs: 1, retryMs });
}

function commitTurn(store: Store, text: string): void {
  store.conversations.commitTurn({
    userId: "ann",
    sessionId: "s",
    agent: "a",
    messages: [{ role: "user", content: text }],
    memoryText: text,
    at: new Date(),
  });
}

describe("memory's job on an embedding server that stops answering", () => {
  test("its request ends past the deadline, the lease goes back, and the job runs again later and embeds", async () => {
    using dir = tmpdir();
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    const store = Store.open(dir.path);
    try {
      // The deadline short for the wedged request only: the retry must be answered by the
      // stand-in, which on a loaded box can take past tens of ms.
      let asked = 0;
      const { name, fleet, several, choice } = severalOn(standIn, () => (++asked === 1 ? 30 : 60_000));
      commitTurn(store, "the cat sat");
      const job = jobOn(store, several, name, choice, { initial: 20, max: 40 });
      standIn.model.embedWedges = 1;
      // Before the fix this run never ended: the request waited on the wedged server for ever.
      await job.run();
      const runtime = fleet.last(name);
      expect(runtime.failures).toHaveLength(1);
      expect(runtime.leases).toBe(0);
      expect(store.memory.vectors.counts("m1").embedded).toBe(0);
      // Backed off, then tried again: the server answers now.
      expect(await waitFor(() => store.memory.vectors.counts("m1").embedded === 1)).toBe(true);
      expect(runtime.failures).toHaveLength(1);
      await job.stop();
    } finally {
      store.close();
      standIn.stop();
    }
  });
});

describe("an input that crashes the embedding server", () => {
  // llama-server crashing on an input is a stand-in behaviour (model.ts `embedCrashOn`), modelled
  // on the recorded aborts mid-request: every time it is sent that input, the process dies.
  test("is set aside after two crashes in a row, its batch narrowed to it; the others embed; it is never sent again", async () => {
    using dir = tmpdir();
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    standIn.model.embedCrashOn = "POISON";
    const store = Store.open(dir.path);
    try {
      const { name, several, choice } = severalOn(standIn);
      for (const text of ["the cat sat", "a POISON pill", "the dog ran"]) commitTurn(store, text);
      const job = jobOn(store, several, name, choice, { initial: 60_000, max: 60_000 });
      // One run: the batch of three crashes the server, is sent a row at a time, and the
      // poisoned row crashes it again, alone. Before the fix the run failed with the first crash
      // and the job sent the same batch again after each back-off, a crash each time.
      await job.run();
      expect(standIn.crashes).toBe(2);
      expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 2, total: 2 });
      // status.memory_index says a row was set aside, and why.
      expect(job.progress()).toMatchObject({
        embedded: 2,
        total: 2,
        set_aside: 1,
        last_set_aside: { reason: "crashes_server" },
      });
      // Nothing left to send: another run asks the server nothing.
      await job.run();
      expect(standIn.crashes).toBe(2);
      // A host's own request holding it is refused unsent, naming it, with the reason.
      const err = await several.embed(choice, ["fine", "a POISON pill"], signal()).catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: "invalid_request",
        data: { field: "input.1", index: 1, reason: "crashes_server" },
      });
      expect(standIn.crashes).toBe(2);
      await job.stop();
    } finally {
      store.close();
      standIn.stop();
    }
  });

  test("is sent again once the model file is replaced: the crashes were the old file's", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
    standIn.model.embedCrashOn = "POISON";
    try {
      const files = () => ({ model: fileIdentity(path), projector: undefined });
      const { several, choice } = severalOn(standIn, undefined, files);
      for (let i = 0; i < 2; i++) await several.embed(choice, ["a POISON pill"], signal()).catch(() => {});
      await expect(several.embed(choice, ["a POISON pill"], signal())).rejects.toMatchObject({
        data: { reason: "crashes_server" },
      });
      expect(standIn.crashes).toBe(2);
      // A pull puts the fixed model in place, and the old server is unloaded (as memory's embedWith does).
      writeFileSync(`${path}.new`, "GGUF two");
      renameSync(`${path}.new`, path);
      standIn.model.embedCrashOn = undefined;
      await several.unload(choice, { force: false });
      // Before the fix the string stayed convicted under the model's name: refused unsent, and
      // memory's job set its row aside under the new file's fingerprint.
      const out = await several.embed(choice, ["a POISON pill"], signal());
      expect(out.embeddings).toHaveLength(1);
    } finally {
      standIn.stop();
    }
  });
});

describe("vectors from a server whose model's drive does not answer", () => {
  test("are not kept, the model stays loaded, and no synchronous stat touched the file", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const launch = { files: { model: fileIdentity(path), projector: undefined } } as unknown as LaunchView;
    const { models, unloaded } = modelsOn(launch);
    const choice = { name: "embedder" } as ModelChoice;
    const silent = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1 });
    const statSync = spyOn(fs, "statSync");
    try {
      await expect(
        embedWith(models, choice, ["a"], new AbortController().signal, path, silent),
      ).rejects.toThrow("did not answer");
      expect(statSync.mock.calls.filter((c) => c[0] === path)).toEqual([]);
    } finally {
      statSync.mockRestore();
    }
    expect(unloaded).toEqual([]);
  });
});

describe("a recall cancelled while its embedding model's stat hangs", () => {
  test("ends at once with the cancel's reason, not after the drive's 30 s wait", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const launch = { files: { model: fileIdentity(path), projector: undefined } } as unknown as LaunchView;
    const { models } = modelsOn(launch);
    const asked = Promise.withResolvers<void>();
    // The drive never answers, and its wait is never over in this test.
    const silent = new DriveAnswers({
      stat: () => {
        asked.resolve();
        return new Promise(() => {});
      },
      statWaitMs: 60_000,
    });
    const controller = new AbortController();
    const embedded = embedWith(
      models,
      { name: "embedder" } as ModelChoice,
      ["a"],
      controller.signal,
      path,
      silent,
    );
    await asked.promise;
    controller.abort(new Error("the chat was cancelled"));
    await expect(embedded).rejects.toThrow("the chat was cancelled");
  });
});
