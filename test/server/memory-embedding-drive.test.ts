import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ModelChoice } from "../../src/config/choose-model.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { LaunchView } from "../../src/runtime/launch.ts";
import type { ModelsApi } from "../../src/runtime/models-api.ts";
import { embeddingFingerprintAsked, embedWith, memoryEmbedder } from "../../src/server/memory-embedding.ts";
import type { MemoryEmbedder } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { fileIdentity } from "../../src/util/file-identity.ts";
import { commitNotedTurn } from "../fixtures/noted-turn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo } from "../models/cache-layout.ts";

// The embedding model's fingerprint (its file's identity) is read at the start of each run of
// memory's job, for each document's chunks, each recall and the index's warm-up at start: a
// synchronous stat of a model on a dead network mount held the whole core there for minutes.

/** Models that embed every text as [1, 0]; `embedded` counts the requests. */
function fakeModels() {
  const state = { embedded: 0 };
  const models = {
    embed: async (_m: unknown, input: string[]) => {
      state.embedded++;
      return { dimensions: 2, embeddings: input.map(() => [1, 0]), usage: { prompt_tokens: 1 } };
    },
    unload: async () => ({ unloaded: true }),
  } as unknown as ModelsApi;
  return { models, state };
}

function configFor(path: string, extraArgs: string[] = []) {
  return ConfigSchema.parse({
    model: { path: "/m/chat.gguf" },
    memory: { enabled: true, embedding_model: "embed" },
    models: [{ name: "embed", path, kind: "embedding", extra_args: extraArgs }],
  });
}

/** A drive that never answers, its wait 1 ms; `asked` gets each path it was asked. */
function deadDrive(asked: string[]): DriveAnswers {
  const stat = (p: string) => {
    asked.push(p);
    return new Promise(() => {});
  };
  return new DriveAnswers({ stat, statWaitMs: 1 });
}

describe("memory's job with an embedding model whose drive does not answer", () => {
  test("no synchronous stat of the model: its run gives up for now and embeds nothing", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const store = Store.open(join(dir.path, "data"));
    commitNotedTurn(store, "ann", "s", "the cat sat");
    const { models, state } = fakeModels();
    const asked: string[] = [];
    const silent = deadDrive(asked);
    const statSync = spyOn(fs, "statSync");
    let job: MemoryEmbedder | undefined;
    try {
      job = memoryEmbedder(configFor(path), store, models, silent);
      await job?.run();
      await job?.embedChunks([1], () => {}, new AbortController().signal);
      // Before the fix each of these read the model's identity with a statSync: a hung core.
      expect(statSync.mock.calls.filter((c) => c[0] === path)).toEqual([]);
      expect(asked).toContain(path);
      expect(state.embedded).toBe(0);
    } finally {
      statSync.mockRestore();
      await job?.stop();
      store.close();
    }
  });

  test("a drive that answers gives the fingerprint the file's identity gave before: no row embedded again", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    const adapter = join(dir.path, "lora.gguf");
    writeFileSync(path, "GGUF one");
    writeFileSync(adapter, "GGUF lora");
    const args = ["--lora", adapter];
    const store = Store.open(join(dir.path, "data"));
    commitNotedTurn(store, "ann", "s", "the cat sat");
    const { models, state } = fakeModels();
    const job = memoryEmbedder(configFor(path, args), store, models, new DriveAnswers());
    try {
      await job?.run();
      expect(state.embedded).toBe(1);
      const print = await embeddingFingerprintAsked(path, args, new DriveAnswers());
      expect(store.memory.vectors.counts(print).embedded).toBe(1);
    } finally {
      await job?.stop();
      store.close();
    }
  });
});

describe("the fingerprint of an hf: embedding model whose cache's drive does not answer", () => {
  test("rejects before the cache is read to resolve it; once it answers, the cached file's", async () => {
    using dir = tmpdir();
    const before = process.env.HF_HUB_CACHE;
    process.env.HF_HUB_CACHE = join(dir.path, "hub");
    const ref = "hf:org/embed:Q8_0";
    const { snapshot } = layRepo(
      join(dir.path, "hub"),
      "org/embed",
      { "embed-Q8_0.gguf": "GGUF one" },
      { commit: "a".repeat(40) },
    );
    const asked: string[] = [];
    const silent = deadDrive(asked);
    const spies = [spyOn(fs, "statSync"), spyOn(fs, "realpathSync"), spyOn(fs, "readFileSync")];
    try {
      await expect(embeddingFingerprintAsked(ref, [], silent)).rejects.toThrow("did not answer");
      const touched = spies.flatMap((s) => s.mock.calls.map((c) => String(c[0])));
      expect(touched.filter((p) => p.startsWith(dir.path))).toEqual([]);
      expect(asked).toEqual([join(dir.path, "hub")]);
    } finally {
      for (const s of spies) s.mockRestore();
    }
    try {
      // Keyed by the blob the snapshot links to, as a path to it would be.
      const blob = fs.realpathSync(join(snapshot, "embed-Q8_0.gguf"));
      expect(await embeddingFingerprintAsked(ref, [], new DriveAnswers())).toBe(
        await embeddingFingerprintAsked(blob, [], new DriveAnswers()),
      );
    } finally {
      if (before === undefined) delete process.env.HF_HUB_CACHE;
      else process.env.HF_HUB_CACHE = before;
    }
  });
});

describe("vectors checked against the file the embedding model's path names now", () => {
  test("that file's identity comes from a stat asked off the loop, not a synchronous one", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const files = { model: fileIdentity(path), projector: undefined };
    const models = {
      embed: async (_m: unknown, input: string[], _s: AbortSignal, onLaunch?: (l: LaunchView) => void) => {
        onLaunch?.({ files } as unknown as LaunchView);
        return { dimensions: 2, embeddings: input.map(() => [1, 0]), usage: { prompt_tokens: 1 } };
      },
    } as unknown as ModelsApi;
    const statSync = spyOn(fs, "statSync");
    try {
      const out = await embedWith(
        models,
        { name: "embed" } as ModelChoice,
        ["a"],
        new AbortController().signal,
        path,
        new DriveAnswers(),
      );
      expect(out).toEqual([[1, 0]]);
      // Before the fix the path was stat'd synchronously once its launch's file had answered.
      expect(statSync.mock.calls.filter((c) => c[0] === path)).toEqual([]);
    } finally {
      statSync.mockRestore();
    }
  });
});
