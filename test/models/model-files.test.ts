import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { answeringFiles, chooseEmbedModel, findModel, shownName } from "../../src/config/choose-model.ts";
import { parseConfigText } from "../../src/config/load.ts";
import type { Config } from "../../src/config/schema.ts";
import { modelFiles } from "../../src/models/model-files.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

// A model configured by `hf:` reference, named by the path of its file in the cache (what the
// `models` listing shows a host's picker): that model, its one llama-server, not a second
// server of the same file with its memory taken twice (docs/models.md "Several models").

const before = process.env.HF_HUB_CACHE;
afterEach(() => {
  if (before === undefined) delete process.env.HF_HUB_CACHE;
  else process.env.HF_HUB_CACHE = before;
});

function cached(dir: string) {
  const chat = layRepo(dir, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
  const vec = layRepo(dir, "org/e", { "e-Q8_0.gguf": tinyModel(7) });
  process.env.HF_HUB_CACHE = dir;
  const text = [
    "model: {path: 'hf:org/m:Q4_K_M'}",
    "models:",
    "  - {name: vec, path: 'hf:org/e:Q8_0', kind: embedding}",
    "  - {name: gone, path: 'hf:org/absent:Q4_K_M'}",
    "",
  ].join("\n");
  const config = parseConfigText(text, join(dir, "config.yaml")).config;
  return { config, chat: join(chat.snapshot, "m-Q4_K_M.gguf"), vec: join(vec.snapshot, "e-Q8_0.gguf") };
}

/** As the methods match a request's model: the drives asked and the references resolved ahead, off the loop. */
async function found(config: Config, ref: string) {
  return findModel(config, ref, await answeringFiles(config, ref, modelFiles));
}

describe("a configured hf: model by its cached file's path", () => {
  test("is that model, the result showing the request's spelling; an embed takes it too", async () => {
    using dir = tmpdir();
    const { config, chat, vec } = cached(dir.path);
    const choice = await found(config, chat);
    expect(choice).toMatchObject({ kind: "configured", name: "default" });
    expect(shownName(choice)).toBe(chat);
    // Refused before as a path that is no configured embedding model.
    expect(chooseEmbedModel(config, vec, await answeringFiles(config, vec, modelFiles))).toMatchObject({
      kind: "configured",
      name: "vec",
    });
  });

  test("another file is still a path of its own; a configured reference not pulled matches nothing", async () => {
    using dir = tmpdir();
    const { config } = cached(dir.path);
    const other = layRepo(dir.path, "org/other", { "o-Q4_K_M.gguf": tinyModel(3) });
    const choice = await found(config, join(other.snapshot, "o-Q4_K_M.gguf"));
    expect(choice.kind).toBe("path");
  });
});

describe("a cached file by another hf: reference than the configured one", () => {
  test("the listing's model_path (by file) or another case of the quant is that configured model, not a second server", async () => {
    using dir = tmpdir();
    const { config } = cached(dir.path);
    // `models` shows `model_path: hf:org/m:m-Q4_K_M.gguf` for the file the config names by quant.
    for (const ref of ["hf:org/m:m-Q4_K_M.gguf", "hf:org/m:q4_k_m", "hf:org/m"]) {
      const choice = await found(config, ref);
      expect(choice).toMatchObject({ kind: "configured", name: "default" });
      expect(shownName(choice)).toBe(ref);
    }
  });

  test("two references to one unconfigured cached file are one model, shown as each request spelled it", async () => {
    using dir = tmpdir();
    const { config } = cached(dir.path);
    const other = layRepo(dir.path, "org/other", { "o-Q4_K_M.gguf": tinyModel(3) });
    const file = join(other.snapshot, "o-Q4_K_M.gguf");
    const refs = ["hf:org/other:Q4_K_M", "hf:org/other:o-Q4_K_M.gguf", file];
    const choices = await Promise.all(refs.map((ref) => found(config, ref)));
    expect(new Set(choices.map((c) => c.name)).size).toBe(1);
    expect(choices.map(shownName)).toEqual(refs);
    // Not pulled: the reference as given, so its load says how to pull it.
    expect(await found(config, "hf:org/absent2:Q4_K_M")).toMatchObject({
      kind: "path",
      name: "hf:org/absent2:Q4_K_M",
    });
  });
});
