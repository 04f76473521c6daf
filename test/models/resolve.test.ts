import { describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { hubCacheDir } from "../../src/models/hf-cache.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { resolveCached, resolveModelPath } from "../../src/models/resolve.ts";
import { type PlanDeps, planLaunch } from "../../src/plan/launch.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { parseModelRef } from "../../src/protocol/model-ref.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

/** The CoreError a resolve refuses with. */
const errorOf = (resolving: Promise<unknown>): Promise<CoreError> =>
  resolving.then(
    () => {
      throw new Error("resolved");
    },
    (e: unknown) => e as CoreError,
  );

describe("hf: model paths resolve from the cache, offline", () => {
  test("by quantization (any case), by file, and a split model to its first part with every part", async () => {
    using dir = tmpdir();
    const { snapshot, commit } = layRepo(dir.path, "org/m", {
      "m-Q4_K_M.gguf": tinyModel(),
      "m-Q8_0-00001-of-00002.gguf": tinyModel(7),
      "m-Q8_0-00002-of-00002.gguf": tinyModel(7),
    });
    const env = { HF_HUB_CACHE: dir.path };
    expect(await resolveModelPath("hf:org/m:q4_k_m", env)).toBe(join(snapshot, "m-Q4_K_M.gguf"));
    expect(await resolveModelPath("hf:org/m:m-Q4_K_M.gguf", env)).toBe(join(snapshot, "m-Q4_K_M.gguf"));
    expect(await resolveCached(parseModelRef("org/m:Q8_0"), dir.path)).toEqual({
      kind: "found",
      path: join(snapshot, "m-Q8_0-00001-of-00002.gguf"),
      files: [join(snapshot, "m-Q8_0-00001-of-00002.gguf"), join(snapshot, "m-Q8_0-00002-of-00002.gguf")],
      commit,
      file: "m-Q8_0-00001-of-00002.gguf",
    });
    // A revision that is a commit hash needs no ref.
    expect((await resolveCached(parseModelRef("org/m:Q4_K_M", commit), dir.path)).kind).toBe("found");
    // A plain path is left alone.
    expect(await resolveModelPath("/models/x.gguf", env)).toBe("/models/x.gguf");
  });

  test("not in the cache: model_missing naming the pull command", async () => {
    using dir = tmpdir();
    const err = await errorOf(resolveModelPath("hf:org/absent:Q4_K_M", { HF_HUB_CACHE: dir.path }));
    expect(err.code).toBe("model_missing");
    expect(err.message).toContain("local-ai pull org/absent:Q4_K_M");
    expect(err.data).toMatchObject({ problem: "not_downloaded", pull: "local-ai pull org/absent:Q4_K_M" });
  });

  test("a quant the snapshot lacks is not downloaded, and the message says what is cached", async () => {
    using dir = tmpdir();
    layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    const err = await errorOf(resolveModelPath("hf:org/m:Q8_0", { HF_HUB_CACHE: dir.path }));
    expect(err.data?.problem).toBe("not_downloaded");
    expect(err.message).toContain("m-Q4_K_M.gguf");
    expect(err.message).toContain("local-ai pull org/m:Q8_0");
  });

  test("broken refs: no ref, garbage in it, or a commit whose snapshot is gone", async () => {
    using dir = tmpdir();
    const { root } = layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() }, { refs: [] });
    const env = { HF_HUB_CACHE: dir.path };
    expect((await errorOf(resolveModelPath("hf:org/m:Q4_K_M", env))).message).toContain(
      "revision main was never pulled",
    );
    mkdirSync(join(root, "refs"), { recursive: true });
    writeFileSync(join(root, "refs", "main"), "not-a-commit\n");
    expect((await errorOf(resolveModelPath("hf:org/m:Q4_K_M", env))).data?.problem).toBe("broken_ref");
    writeFileSync(join(root, "refs", "main"), "a".repeat(40));
    const gone = await errorOf(resolveModelPath("hf:org/m:Q4_K_M", env));
    expect(gone.data?.problem).toBe("broken_ref");
    expect(gone.message).toContain("snapshot folder is missing");
  });

  test("a snapshot link to a missing blob, and a split model missing a part", async () => {
    using dir = tmpdir();
    layRepo(dir.path, "org/m", {
      "m-Q4_K_M.gguf": null,
      "m-Q8_0-00001-of-00002.gguf": tinyModel(7),
    });
    const env = { HF_HUB_CACHE: dir.path };
    const dangling = await errorOf(resolveModelPath("hf:org/m:Q4_K_M", env));
    expect(dangling.data).toMatchObject({ problem: "broken_link" });
    expect(dangling.message).toContain("local-ai pull org/m:Q4_K_M");
    const split = await errorOf(resolveModelPath("hf:org/m:Q8_0", env));
    expect(split.data).toMatchObject({ problem: "incomplete_split" });
    expect(split.message).toContain("m-Q8_0-00002-of-00002.gguf");
  });

  test("an ambiguous quant in the cache is config_invalid listing the matches", async () => {
    using dir = tmpdir();
    layRepo(dir.path, "org/m", { "a/m-Q4_K_M.gguf": tinyModel(), "b/m-Q4_K_M.gguf": tinyModel() });
    const err = await errorOf(resolveModelPath("hf:org/m:Q4_K_M", { HF_HUB_CACHE: dir.path }));
    expect(err.code).toBe("config_invalid");
    expect(err.data).toMatchObject({ key: "model.path", matches: ["a/m-Q4_K_M.gguf", "b/m-Q4_K_M.gguf"] });
    expect(err.message).toContain("hf:org/m:a/m-Q4_K_M.gguf");
  });

  test("a snapshot of many matching files lists the first of them, counting all", async () => {
    // A snapshot of 150 files of one quantization (a hostile or broken repo pulled by a file
    // each): every name was in the message and in data.matches, a line growing with the cache.
    using dir = tmpdir();
    const names = Array.from({ length: 150 }, (_, i) => `d${String(i).padStart(3, "0")}/m-Q4_K_M.gguf`);
    layRepo(dir.path, "org/m", Object.fromEntries(names.map((n) => [n, ""])));
    const err = await errorOf(resolveModelPath("hf:org/m:Q4_K_M", { HF_HUB_CACHE: dir.path }));
    expect(err.code).toBe("config_invalid");
    expect(err.data).toMatchObject({ key: "model.path", matches: names.slice(0, 100), matches_count: 150 });
    expect(err.message).toContain("150 cached files match");
    expect(err.message).toContain(`${names[19]}, … (150 in all)`);
    expect(err.message).not.toContain(names[20]!);
    expect(err.message).toContain(`hf:org/m:${names[0]}`);
  });

  test("a quantization the snapshot lacks names the first of the many it holds", async () => {
    using dir = tmpdir();
    const names = Array.from({ length: 150 }, (_, i) => `m${String(i).padStart(3, "0")}-Q4_K_M.gguf`);
    layRepo(dir.path, "org/m", Object.fromEntries(names.map((n) => [n, ""])));
    const err = await errorOf(resolveModelPath("hf:org/m:Q8_0", { HF_HUB_CACHE: dir.path }));
    expect(err.data).toMatchObject({ problem: "not_downloaded" });
    expect(err.message).toContain(`${names[19]}, … (150 in all)`);
    expect(err.message).not.toContain(names[20]!);
  });
});

describe("the config and its consumers", () => {
  const HW = cpuOnlyMachine();
  const deps: PlanDeps = { readModel: defaultPlanDeps.readModel, probe: async () => HW };
  // The default cache of this test file (test/preload.ts gives it its own XDG_CACHE_HOME).
  const cache = hubCacheDir(process.env, process.env.HOME!);
  /** Doctor's model check of a config whose model.path is `path`. */
  async function doctorModelCheck(dir: string, path: string) {
    writeFileSync(join(dir, "config.yaml"), `model:\n  path: ${path}\n`);
    const report = await runDoctor(
      { loadedConfig: () => loadConfig("config.yaml", dir) },
      { ...deps, run: async () => ({ kind: "exit", code: 0, stdout: "", stderr: "version: 1 (x)" }) },
    );
    return report.checks.find((c) => c.id === "model")!;
  }

  test("the loader keeps hf: paths as written and refuses a malformed one with its line", () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/m:Q4_K_M\n");
    expect(loadConfig("config.yaml", dir.path).config.model.path).toBe("hf:org/m:Q4_K_M");
    writeFileSync(join(dir.path, "bad.yaml"), "app: {}\nmodel:\n  path: 'hf:not a repo'\n");
    const err = coreErrorOf(() => loadConfig("bad.yaml", dir.path));
    expect(err.code).toBe("config_invalid");
    expect(err.message).toContain(":3:");
    expect(err.message).toContain("model.path");
  });

  test("plan (and so chat's launch) gets the cached snapshot path; absent, model_missing with the pull command", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(cache, "org/planned", { "p-Q4_K_M.gguf": tinyModel() });
    try {
      writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/planned:Q4_K_M\n");
      const launch = await planLaunch(loadConfig("config.yaml", dir.path).config, deps);
      expect(launch.model_path).toBe(join(snapshot, "p-Q4_K_M.gguf"));

      writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/planned:Q8_0\n");
      const err = await planLaunch(loadConfig("config.yaml", dir.path).config, deps).catch((e) => e);
      expect(err).toBeInstanceOf(CoreError);
      expect(err.code).toBe("model_missing");
      expect(err.message).toContain("local-ai pull org/planned:Q8_0");
    } finally {
      rmSync(join(cache, "models--org--planned"), { recursive: true, force: true });
    }
  });

  test("doctor's model check fails with the pull command as its fix", async () => {
    using dir = tmpdir();
    const model = await doctorModelCheck(dir.path, "hf:org/nowhere:Q4_K_M");
    expect(model.status).toBe("fail");
    expect(model.message).toContain("not in the cache");
    expect(model.fix).toBe("fetch it with: local-ai pull org/nowhere:Q4_K_M");
    expect(model.data).toMatchObject({ code: "model_missing", problem: "not_downloaded" });
  });

  test("an hf: model whose blob is cut short says to pull it again, with the command", async () => {
    // A core before the blob's flush (download.ts) could rename a verified download whose bytes
    // a power cut then lost: offline nothing knows the listed size, so the file resolves and its
    // read finds it truncated. The fix said "download the model again", not how.
    using dir = tmpdir();
    layRepo(cache, "org/short", { "s-Q4_K_M.gguf": { ...tinyModel(), truncateBy: 4096 } });
    try {
      const model = await doctorModelCheck(dir.path, "hf:org/short:Q4_K_M");
      expect(model.status).toBe("fail");
      expect(model.message).toContain("truncated");
      expect(model.message).toContain("pull it again with: local-ai pull org/short:Q4_K_M");
      expect(model.fix).toBe("fetch it with: local-ai pull org/short:Q4_K_M");
      expect(model.data).toMatchObject({ problem: "truncated", pull: "local-ai pull org/short:Q4_K_M" });
    } finally {
      rmSync(join(cache, "models--org--short"), { recursive: true, force: true });
    }
  });
});
