import { describe, expect, test } from "bun:test";
import { renameSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ModelChoice } from "../../src/config/choose-model.ts";
import type { LaunchView } from "../../src/runtime/launch.ts";
import type { ModelsApi } from "../../src/runtime/models-api.ts";
import { embeddingFingerprint, embedWith } from "../../src/server/memory-embedding.ts";
import { fileIdentity } from "../../src/util/file-identity.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("the embedding model's fingerprint", () => {
  test("the same file and flags give the same one; a file replaced or touched, or other flags, another", () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const first = embeddingFingerprint(path, []);
    expect(embeddingFingerprint(path, [])).toBe(first);
    expect(embeddingFingerprint(path, ["--pooling", "cls"])).not.toBe(first);
    utimesSync(path, new Date(1_000_000), new Date(2_000_000));
    const touched = embeddingFingerprint(path, []);
    expect(touched).not.toBe(first);
    // Replaced in place by another file of the same size and time: another inode.
    const other = join(dir.path, "other.gguf");
    writeFileSync(other, "GGUF two");
    utimesSync(other, new Date(1_000_000), new Date(2_000_000));
    renameSync(other, path);
    expect(embeddingFingerprint(path, [])).not.toBe(touched);
    // A path that cannot be read (an hf: reference not yet resolved) is keyed by the path itself.
    expect(embeddingFingerprint("hf:org/model", [])).toBe(embeddingFingerprint("hf:org/model", []));
  });
});

describe("vectors from a server whose model file was replaced since it started", () => {
  test("are refused and the model unloaded, so none is kept under the new file's identity", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    // The server as the launcher made it: the file read just before its spawn.
    const launch = { files: { model: fileIdentity(path), projector: undefined } } as unknown as LaunchView;
    const unloaded: string[] = [];
    const models = {
      embed: async (
        _m: ModelChoice,
        input: string[],
        _s: AbortSignal,
        onLaunch?: (l: LaunchView) => void,
      ) => {
        onLaunch?.(launch);
        return { dimensions: 2, embeddings: input.map(() => [1, 0]), usage: { prompt_tokens: 1 } };
      },
      unload: async (m: ModelChoice) => {
        unloaded.push(m.name);
        return { model: m.name, unloaded: true };
      },
    } as unknown as ModelsApi;
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
