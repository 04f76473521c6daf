import { afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { answeringFiles, findModel } from "../../src/config/choose-model.ts";
import { loadConfig, parseConfigText } from "../../src/config/load.ts";
import { findProjector } from "../../src/models/find-projector.ts";
import { planDepsWithHub } from "../../src/models/hub-plan-deps.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { modelFiles } from "../../src/models/model-files.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { embeddingFingerprintAsked } from "../../src/server/memory-embedding.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { tinyLlama } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

// An `hf:` model's cached snapshot was listed by readdirSync at every plan (a start, a restart, a
// wake, each chat's launch): 10^4 files held ping and cancel ~100 ms, a snapshot on a network
// drive gone offline held them until the drive answered. The plan's reads list it off the loop.

let dir: ReturnType<typeof tmpdir>;
let before: string | undefined;
beforeEach(() => {
  dir = tmpdir();
  before = process.env.HF_HUB_CACHE;
  process.env.HF_HUB_CACHE = dir.path;
});
afterEach(() => {
  if (before === undefined) delete process.env.HF_HUB_CACHE;
  else process.env.HF_HUB_CACHE = before;
  dir[Symbol.dispose]();
});

/** The folders under the cache `run` listed synchronously, and what it returned. */
async function syncListings<T>(run: () => Promise<T>): Promise<{ listed: string[]; value: T }> {
  const spy = spyOn(fs, "readdirSync");
  try {
    const value = await run();
    const listed = spy.mock.calls.map((c) => String(c[0])).filter((p) => p.startsWith(dir.path));
    return { listed, value };
  } finally {
    spy.mockRestore();
  }
}

test("the plan's read of an hf: model (chat, plan, doctor) lists its snapshot off the loop", async () => {
  const { snapshot } = layRepo(dir.path, "org/walk", { "sub/w-Q4_K_M.gguf": tinyModel() });
  const { listed, value } = await syncListings(() =>
    defaultPlanDeps.readModel("hf:org/walk:Q4_K_M", "model.path"),
  );
  expect(value.path).toBe(join(snapshot, "sub", "w-Q4_K_M.gguf"));
  expect(listed).toEqual([]);
});

test("the plan command's read with the hub lists the snapshot off the loop too", async () => {
  const { snapshot } = layRepo(dir.path, "org/hub", { "h-Q4_K_M.gguf": tinyModel() });
  const deps = planDepsWithHub(defaultPlanDeps, { HF_HUB_CACHE: dir.path, HF_HUB_OFFLINE: "1" });
  const { listed, value } = await syncListings(() => deps.readModel("hf:org/hub:Q4_K_M", "model.path"));
  expect(value.path).toBe(join(snapshot, "h-Q4_K_M.gguf"));
  expect(listed).toEqual([]);
});

test("an hf: projector and an hf: embedding model's fingerprint list the snapshot off the loop", async () => {
  const files = { "v.gguf": tinyLlama(), "mmproj-F16.gguf": mmproj(), "e-Q8_0.gguf": tinyModel(7) };
  const { snapshot } = layRepo(dir.path, "org/vision", files);
  const model = modelInfo(await readGgufHeader(join(snapshot, "v.gguf")));
  const projector = await syncListings(() => findProjector("hf:org/vision:mmproj-F16.gguf", model));
  expect(projector.value).toMatchObject({ kind: "found", info: { path: join(snapshot, "mmproj-F16.gguf") } });
  expect(projector.listed).toEqual([]);
  const ref = "hf:org/vision:Q8_0";
  const print = await syncListings(() => embeddingFingerprintAsked(ref, [], new DriveAnswers()));
  const blob = fs.realpathSync(join(snapshot, "e-Q8_0.gguf"));
  expect(print.value).toBe(await embeddingFingerprintAsked(blob, [], new DriveAnswers()));
  expect(print.listed).toEqual([]);
});

test("a request's hf: model matched to the configured ones (chat, models.load) lists no snapshot on the loop", async () => {
  const { snapshot } = layRepo(dir.path, "org/req", { "r-Q4_K_M.gguf": tinyModel() });
  const config = parseConfigText(
    "models:\n  - {name: other, path: 'hf:org/req:Q4_K_M'}\n",
    join(dir.path, "config.yaml"),
  ).config;
  for (const ref of ["hf:org/req:q4_k_m", join(snapshot, "r-Q4_K_M.gguf")]) {
    const { listed, value } = await syncListings(async () =>
      findModel(config, ref, await answeringFiles(config, ref, modelFiles)),
    );
    expect(value).toMatchObject({ kind: "configured", name: "other" });
    expect(listed).toEqual([]);
  }
});

test("plan with a model given as an hf: reference to a configured one lists no snapshot on the loop", async () => {
  layRepo(dir.path, "org/pl", { "p-Q4_K_M.gguf": tinyModel() });
  fs.writeFileSync(join(dir.path, "config.yaml"), "models:\n  - {name: other, path: 'hf:org/pl:Q4_K_M'}\n");
  const source = {
    loadedConfig: () => loadConfig("config.yaml", dir.path),
    defaultConfig: () => loadConfig("config.yaml", dir.path),
  };
  const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() } };
  const env = { HF_HUB_CACHE: dir.path, HF_HUB_OFFLINE: "1" };
  const { listed, value } = await syncListings(() =>
    planReportWithHub(source, { model: "hf:org/pl:q4_k_m" }, env, deps),
  );
  expect(value.plan.model_path).toContain("p-Q4_K_M.gguf");
  expect(listed).toEqual([]);
});

test("plan with a configured model's name asks no drive and resolves no hf: model ahead", async () => {
  // Taken for a path under the config's folder, a name had every configured model's drive asked
  // (a dead network mount held the plan 30 s) and each hf: snapshot listed, all for nothing.
  layRepo(dir.path, "org/nm", { "n-Q4_K_M.gguf": tinyModel() });
  fs.writeFileSync(
    join(dir.path, "config.yaml"),
    "models:\n  - {name: other, path: 'hf:org/nm:Q4_K_M'}\n  - {name: far, path: /mnt/gone/far.gguf}\n",
  );
  const source = {
    loadedConfig: () => loadConfig("config.yaml", dir.path),
    defaultConfig: () => loadConfig("config.yaml", dir.path),
  };
  const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() } };
  const env = { HF_HUB_CACHE: dir.path, HF_HUB_OFFLINE: "1" };
  const asked = spyOn(modelFiles.drives!, "answers");
  const ahead = spyOn(modelFiles, "cachedAsync");
  try {
    const report = await planReportWithHub(source, { model: "other" }, env, deps);
    expect(report.plan.model_path).toContain("n-Q4_K_M.gguf");
    // The plan's own reads ask the cache and the file it plans; none other.
    const paths = asked.mock.calls.map((c) => String(c[0]));
    for (const other of [
      join(dir.path, "other"),
      join(dir.path, "models", "model.gguf"),
      "/mnt/gone/far.gguf",
    ])
      expect(paths).not.toContain(other);
    expect(ahead).not.toHaveBeenCalled();
  } finally {
    asked.mockRestore();
    ahead.mockRestore();
  }
});
