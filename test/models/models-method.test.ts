import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { models } from "../../src/methods/models.ts";
import { hubCacheDir } from "../../src/models/hf-cache.ts";
import { ModelsResultSchema } from "../../src/protocol/models.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

// This file's own cache (test/preload.ts gives each test file its XDG_CACHE_HOME).
const cache = hubCacheDir(process.env, process.env.HOME!);
const dir = tmpdir();
afterAll(() => dir[Symbol.dispose]());

describe("the models method", () => {
  test("lists the cache's models with their verdict; strict params", async () => {
    layRepo(cache, "org/listed", { "l-Q4_K_M.gguf": tinyModel() });
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/listed:Q4_K_M\n");
    const h = startHarness({ cwd: dir.path });
    const res = await h.request({ id: 1, method: "models", params: {} }, 20_000);
    expect(res.type).toBe("result");
    const result = ModelsResultSchema.parse(res.result);
    expect(result.cache_dir).toBe(cache);
    expect(result.models).toHaveLength(1);
    expect(result.models[0]).toMatchObject({ repo: "org/listed", configured: true, quantization: "Q4_K_M" });
    expect(typeof result.models[0]!.fits).toBe("boolean");

    const bad = await h.request({ id: 2, method: "models", params: { folder: "/x" } });
    expect(bad).toMatchObject({ type: "error", code: "invalid_request" });
    h.end();
    await h.exit;
  });
});

describe("the models method's loaded, one model", () => {
  test("its llama-server still starting (or restarting after a crash) is not loaded, as with several models", async () => {
    using here = tmpdir();
    writeGguf(here.path, "m.gguf", tinyModel());
    writeFileSync(join(here.path, "config.yaml"), "model:\n  path: ./m.gguf\n");
    const loadedConfig = () => loadConfig("config.yaml", here.path);
    let state = "starting";
    const file = join(here.path, "m.gguf");
    const services = {
      loadedConfig,
      defaultConfig: loadedConfig,
      models: () => undefined,
      existingLlama: () => ({
        snapshot: () => ({ pid: 42, state, sleep: "awake", model: { path: file } }),
      }),
    } as never;
    const ctx = {
      id: "m",
      signal: new AbortController().signal,
      stopping: new AbortController().signal,
    } as never;
    const loaded = async () =>
      (await models.run({}, ctx, services)).models.find((m) => m.path === file)?.loaded;
    expect(await loaded()).toBe(false);
    state = "ready";
    expect(await loaded()).toBe(true);
  });
});
