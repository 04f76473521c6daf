import { afterEach, describe, expect, test } from "bun:test";
import { rmSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { answeringFiles, findModel } from "../../src/config/choose-model.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { modelFiles } from "../../src/models/model-files.ts";
import { type PlanDeps, planInputs } from "../../src/plan/launch.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel, tinySplit } from "../models/cache-layout.ts";
import { FakeFleet } from "../runtime/helpers/fake-model-runtime.ts";
import { rejection } from "../runtime/helpers/harness.ts";

// A GGUF of the Hugging Face cache named by a chat (its snapshot path, as the `models` listing
// shows it, or an `hf:` reference): one model however spelled, its name the file through its
// links (a blob named by its hash), but llama-server and the plan are given the snapshot's name,
// so a split model finds its other parts and `auto` its projector in the snapshot.

const before = process.env.HF_HUB_CACHE;
afterEach(() => {
  if (before === undefined) delete process.env.HF_HUB_CACHE;
  else process.env.HF_HUB_CACHE = before;
});

const never = () => new AbortController().signal;

describe("a cached model by path", () => {
  test("a split model is planned from its snapshot's parts, not the first part's blob alone", async () => {
    using dir = tmpdir();
    const [one, two] = tinySplit(7);
    const repo = layRepo(dir.path, "org/split", {
      "s-Q8_0-00001-of-00002.gguf": one,
      "s-Q8_0-00002-of-00002.gguf": two,
    });
    layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    process.env.HF_HUB_CACHE = dir.path;
    const config = parseConfigText(
      `app: {data_dir: ${JSON.stringify(join(dir.path, "data"))}}\nmodel: {path: 'hf:org/m:Q4_K_M'}\nmodels:\n  - {name: other, path: 'hf:org/m:Q4_K_M'}\n`,
      join(dir.path, "config.yaml"),
    ).config;
    const deps: PlanDeps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
    const planned: { path: string; files: readonly string[] }[] = [];
    const reuse = { saveBeforeUnload: async () => {}, stop: async () => {} } as unknown as PromptReuse;
    const several = new SeveralModels({
      config: () => config,
      reuse: () => reuse,
      pinnedProblem: async () => null,
      plan: async (c) => {
        const inputs = await planInputs(c, deps);
        planned.push({ path: c.model.path, files: inputs.model.files });
        // Enough seen: no llama-server is started.
        throw new Error("stop here");
      },
    });
    try {
      for (const ref of [join(repo.snapshot, "s-Q8_0-00001-of-00002.gguf"), "hf:org/split:Q8_0"]) {
        const choice = findModel(config, ref, modelFiles);
        const err = await rejection(several.provider(choice).acquire(never()));
        expect(err.message).toContain("stop here");
      }
      expect(planned.map((p) => p.files.length)).toEqual([2, 2]);
    } finally {
      await several.stop();
    }
  });

  test("a link to a file named as a GGUF runs that file, as before (a split's parts lie beside it)", () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m-Q4_K_M-00001-of-00002.gguf", tinySplit(7)[0]);
    symlinkSync(join(dir.path, "m-Q4_K_M-00001-of-00002.gguf"), join(dir.path, "current.gguf"));
    const config = parseConfigText("model: {path: ./x.gguf}\n", join(dir.path, "config.yaml")).config;
    const choice = findModel(config, join(dir.path, "current.gguf"), modelFiles);
    expect(choice).toMatchObject({ kind: "path", name: join(dir.path, "m-Q4_K_M-00001-of-00002.gguf") });
    expect("file" in choice).toBe(false);
  });
});

describe("an unconfigured model loaded by hf: reference", () => {
  // The host's app deletes the model from the cache, or pulls a newer revision of it, then
  // unloads it by the reference it loaded it by.
  test.each([
    ["its cache entry is deleted", (root: string) => rmSync(root, { recursive: true, force: true })],
    [
      "a new revision is pulled",
      (root: string) =>
        void layRepo(dirname(root), "org/m", { "m-Q4_K_M.gguf": tinyModel() }, { commit: "b".repeat(40) }),
    ],
  ])("models.unload by that reference stops it after %s", async (_what, change) => {
    using dir = tmpdir();
    const repo = layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    process.env.HF_HUB_CACHE = dir.path;
    const config = parseConfigText("model: {path: ./x.gguf}\n", join(dir.path, "config.yaml")).config;
    const ref = "hf:org/m:Q4_K_M";
    const loaded = findModel(config, ref, await answeringFiles(config, ref, modelFiles));
    const fleet = new FakeFleet({ [loaded.name]: { gib: 1 } });
    const several = new SeveralModels({
      config: () => config,
      reuse: () => ({ saveBeforeUnload: async () => {}, stop: async () => {} }) as unknown as PromptReuse,
      plan: () => Promise.reject(new Error("the fakes plan themselves")),
      pinnedProblem: async () => null,
      runtime: fleet.runtime,
    });
    try {
      await several.load(loaded, { pin: undefined, signal: never(), onProgress: () => {} });
      change(repo.root);
      const asked = findModel(config, ref, await answeringFiles(config, ref, modelFiles));
      expect(asked.name).not.toBe(loaded.name);
      expect(await several.unload(asked, { force: false })).toEqual({ model: ref, unloaded: true });
      expect(several.status().models.map((m) => m.name)).not.toContain(loaded.name);
    } finally {
      await several.stop();
    }
  });
});
