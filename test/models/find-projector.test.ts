import { describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig, loadConfig, parseConfigText } from "../../src/config/load.ts";
import { findProjector } from "../../src/models/find-projector.ts";
import { fitVerdictFor } from "../../src/models/fit-verdict.ts";
import { snapshotRootOf } from "../../src/models/hf-cache.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { type GgufSpec, tinyLlama, tinyLlamaQ8, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo } from "./cache-layout.ts";

const F32 = 0;

async function coreErrorOf(p: Promise<unknown>): Promise<CoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof CoreError) return err;
  throw new Error(`expected a CoreError, got ${String(err)}`);
}

/** Runs `fn` with HF_HUB_CACHE at `cache`, as the core reads it, then puts it back. */
async function inCache<T>(cache: string, fn: () => Promise<T>): Promise<T> {
  const before = process.env.HF_HUB_CACHE;
  process.env.HF_HUB_CACHE = cache;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.HF_HUB_CACHE;
    else process.env.HF_HUB_CACHE = before;
  }
}

/** `files` laid out as `repo` in a cache under `dir`, and the header of its `modelFile`. */
async function repoInCache(dir: string, repo: string, files: Record<string, GgufSpec>, modelFile: string) {
  const cache = join(dir, "cache");
  const { snapshot } = layRepo(cache, repo, files);
  return { cache, snapshot, model: modelInfo(await readGgufHeader(join(snapshot, modelFile))) };
}

async function modelIn(dir: string, spec = tinyLlama(), name = "model.gguf"): Promise<ModelInfo> {
  return modelInfo(await readGgufHeader(writeGguf(dir, name, spec)));
}

describe("mmproj: a path (recordings 105b–105d: llama-server would exit)", () => {
  test("a projector of the model's width is used, from the config", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    const path = writeGguf(dir.path, "proj.gguf", mmproj());
    const found = await findProjector(path, model);
    expect(found).toMatchObject({ kind: "found", source: "config", info: { path, width: 64 } });
  });

  test("a projector whose stat does not answer (a dead network mount) is unreadable after the wait, not read", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    const path = writeGguf(dir.path, "proj.gguf", mmproj());
    // The model's drive answered; the projector's never does: a synchronous read would hold the core.
    const never = () => new Promise<void>(() => {});
    const err = await coreErrorOf(findProjector(path, model, "model.mmproj", { stat: never, statWaitMs: 1 }));
    expect(err).toMatchObject({
      code: "model_plan_error",
      data: { projector: path, key: "model.mmproj", problem: "unreadable" },
    });
    expect(err.message).toContain("did not answer");
  });

  test("another width (105b) → model_plan_error naming the projector and both widths", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path, tinyLlamaQ8());
    const path = writeGguf(dir.path, "proj.gguf", mmproj());
    const err = await coreErrorOf(findProjector(path, model));
    expect(err.code).toBe("model_plan_error");
    expect(err.message).toContain(path);
    expect(err.message).toContain("64");
    expect(err.message).toContain("128");
    expect(err.data).toEqual({
      projector: path,
      key: "model.mmproj",
      problem: "width_mismatch",
      projector_width: 64,
      model_width: 128,
    });
  });

  test("the width is the one llama-server checks, the output tensor's, not a legacy converter's projection_dim", async () => {
    // llava-surgery's converter wrote CLIP's own projection_dim (768 for LLaVA 1.5, whose text
    // model is 4096 wide) and MiniCPM-V's writes 0; libmtmd compares the text model with the
    // projector's last tensor (clip.cpp clip_n_mmproj_embd), so both run under llama-server.
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    const llava = mmproj({ extra: { "clip.vision.projection_dim": { type: "u32", value: 24 } } });
    const legacy = writeGguf(dir.path, "mmproj-llava.gguf", llava);
    expect(await findProjector(legacy, model)).toMatchObject({ kind: "found", info: { width: 64 } });
    // MiniCPM-V's converter names its type `resampler` (minicpmv-convert-image-encoder-to-gguf.py);
    // the width is the projection's first dimension (its ne[0]).
    const resampler = mmproj({
      projector: "resampler",
      extra: { "clip.vision.projection_dim": { type: "u32", value: 0 } },
    });
    resampler.tensors = resampler.tensors.filter((t) => !t.name.startsWith("mm."));
    resampler.tensors.push({ name: "resampler.proj.weight", shape: [64, 48], type: F32 });
    const minicpm = writeGguf(dir.path, "mmproj-minicpmv.gguf", resampler);
    expect(await findProjector(minicpm, model)).toMatchObject({ kind: "found", info: { width: 64 } });
    // MobileVLM's (ldp, ldpv2: the last bias of their blocks, clip.cpp clip_n_mmproj_embd).
    for (const [type, tensor] of [
      ["ldp", "mm.model.mb_block.1.block.2.1.bias"],
      ["ldpv2", "mm.model.peg.0.bias"],
    ] as const) {
      const spec = mmproj({
        projector: type,
        extra: { "clip.vision.projection_dim": { type: "u32", value: 24 } },
      });
      spec.tensors = spec.tensors.filter((t) => !t.name.startsWith("mm."));
      spec.tensors.push({ name: tensor, shape: [64], type: F32 });
      const file = writeGguf(dir.path, `mmproj-${type}.gguf`, spec);
      expect(await findProjector(file, model)).toMatchObject({ kind: "found", info: { width: 64 } });
    }
    // And the tensor still tells a projector of another model apart (105b).
    const wide = await modelIn(dir.path, tinyLlamaQ8(), "wide.gguf");
    const err = await coreErrorOf(findProjector(legacy, wide));
    expect(err.data).toMatchObject({ problem: "width_mismatch", projector_width: 64, model_width: 128 });
  });

  test("a missing file (105c) and a text model (105d) → model_plan_error naming the projector", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    const missing = join(dir.path, "does-not-exist-mmproj.gguf");
    const gone = await coreErrorOf(findProjector(missing, model));
    expect(gone.code).toBe("model_plan_error");
    expect(gone.data).toMatchObject({
      projector: missing,
      problem: "absent",
      projector_width: null,
      model_width: 64,
    });
    const text = writeGguf(dir.path, "tiny-llama.gguf", tinyLlama());
    const wrong = await coreErrorOf(findProjector(text, model));
    expect(wrong.data).toMatchObject({ projector: text, problem: "not_projector", model_width: 64 });
    expect(wrong.message).toContain("not a vision projector");
  });

  test("none is none, whatever lies beside the model", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    writeGguf(dir.path, "mmproj-model-f16.gguf", mmproj());
    expect(await findProjector("none", model)).toEqual({ kind: "none", reason: "mmproj: none" });
  });
});

/**
 * Auto with a stat that answers at once (an NFS client's cached attributes) and a listing that
 * never does (its server gone): each plan ends its wait, and a second waits on the first's
 * listing, which holds a file thread until it answers.
 */
async function listedOnceThoughHung(model: ModelInfo, lister: "readdir" | "snapshotFiles"): Promise<void> {
  let listings = 0;
  const options = {
    stat: async () => ({ ino: 1 }),
    statWaitMs: 1,
    [lister]: () => {
      listings++;
      return new Promise<string[]>(() => {});
    },
  };
  for (let i = 0; i < 2; i++) {
    const found = await findProjector("auto", model, "model.mmproj", options);
    expect(found).toMatchObject({ kind: "none" });
    expect((found as { reason: string }).reason).toContain("its listing did not answer");
  }
  expect(listings).toBe(1);
}

describe("mmproj: auto beside the model", () => {
  test("a folder whose stat does not answer (a dead network mount) is not listed: auto finds none, saying why", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    writeGguf(dir.path, "mmproj-F16.gguf", mmproj());
    // The model's drive answered; its folder's stat never does: a readdirSync would hold the core.
    const never = () => new Promise<void>(() => {});
    const found = await findProjector("auto", model, "model.mmproj", { stat: never, statWaitMs: 1 });
    expect(found).toMatchObject({ kind: "none" });
    expect((found as { reason: string }).reason).toContain("did not answer");
  });

  test("a folder whose stat answered but whose listing never does (an NFS mount's cached attributes, its server gone) ends the wait, listed once", async () => {
    using dir = tmpdir();
    await listedOnceThoughHung(await modelIn(dir.path), "readdir");
  });

  test("listings of two models' folders share the drives' lanes: a hung one's is not started beside", async () => {
    // Each hung listing holds a file thread for good (a hard-mounted share): started outside the
    // lanes (util/drive-answers.ts `laned`), a few took every thread the core reads and writes with.
    using a = tmpdir();
    using b = tmpdir();
    const models = [await modelIn(a.path), await modelIn(b.path)];
    const listed: string[] = [];
    const readdir = (folder: string) => {
      listed.push(folder);
      return new Promise<string[]>(() => {});
    };
    const drives = new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: 2, lanes: 1 });
    for (const model of models)
      expect(await findProjector("auto", model, "model.mmproj", { drives, readdir })).toMatchObject({
        kind: "none",
      });
    expect(listed).toEqual([a.path]);
  });

  test("the only mmproj*.gguf beside it, when its width matches", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    const path = writeGguf(dir.path, "mmproj-tiny-vision-f16.gguf", mmproj());
    writeGguf(dir.path, "other-model.gguf", tinyLlama());
    expect(await findProjector("auto", model)).toMatchObject({
      kind: "found",
      source: "auto",
      info: { path },
    });
  });

  test("none beside it: no projector, no warning", async () => {
    using dir = tmpdir();
    const found = await findProjector("auto", await modelIn(dir.path));
    expect(found).toMatchObject({ kind: "none" });
    expect((found as { warning?: string }).warning).toBeUndefined();
  });

  test("one of another width is passed over with a warning that names both widths", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path, tinyLlamaQ8());
    writeGguf(dir.path, "mmproj.gguf", mmproj());
    const found = await findProjector("auto", model);
    expect(found.kind).toBe("none");
    expect((found as { warning: string }).warning).toContain(
      "projection width 64 is not the model's embedding width 128",
    );
  });

  test("several beside it: none chosen, the warning names them", async () => {
    using dir = tmpdir();
    const model = await modelIn(dir.path);
    writeGguf(dir.path, "mmproj-a.gguf", mmproj());
    writeGguf(dir.path, "mmproj-b.gguf", mmproj());
    const found = await findProjector("auto", model);
    expect(found.kind).toBe("none");
    expect((found as { warning: string }).warning).toContain("mmproj-a.gguf, mmproj-b.gguf");
  });
});

describe("mmproj: auto in the model's hub snapshot", () => {
  test("the F16 one of those whose width matches, whatever the names' order", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/vision-GGUF", {
      "vision-Q4_K_M.gguf": tinyLlama(),
      "mmproj-a-F32.gguf": mmproj({ type: F32 }),
      "mmproj-b-F16.gguf": mmproj(),
      "mmproj-c-wide.gguf": mmproj({ width: 128 }),
    });
    const model = modelInfo(await readGgufHeader(join(snapshot, "vision-Q4_K_M.gguf")));
    expect(snapshotRootOf(model.path)).toBe(snapshot);
    const found = await findProjector("auto", model);
    expect(found).toMatchObject({
      kind: "found",
      source: "auto",
      info: { path: join(snapshot, "mmproj-b-F16.gguf") },
    });
  });

  test("a model in a subfolder of its snapshot finds the projector at the top", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/split-GGUF", {
      "Q4_K_M/vision.gguf": tinyLlama(),
      "mmproj-F16.gguf": mmproj(),
    });
    const model = modelInfo(await readGgufHeader(join(snapshot, "Q4_K_M", "vision.gguf")));
    expect(await findProjector("auto", model)).toMatchObject({
      kind: "found",
      info: { path: join(snapshot, "mmproj-F16.gguf") },
    });
  });

  test("a model in a folder of its own takes that folder's projector, never another model's folder's", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/two-GGUF", {
      "A/model-Q4.gguf": tinyLlama(),
      "A/mmproj-F16.gguf": mmproj(),
      "B/model-Q4.gguf": tinyLlama(),
      "B/mmproj-F16.gguf": mmproj(),
      "C/model-Q4.gguf": tinyLlama(),
    });
    const info = async (file: string) => modelInfo(await readGgufHeader(join(snapshot, file)));
    // B's model took A's projector (first by name): pull now brings B's, and auto agrees.
    expect(await findProjector("auto", await info("B/model-Q4.gguf"))).toMatchObject({
      kind: "found",
      info: { path: join(snapshot, "B", "mmproj-F16.gguf") },
    });
    const none = await findProjector("auto", await info("C/model-Q4.gguf"));
    expect(none).toMatchObject({ kind: "none" });
    expect(none.kind === "none" && none.reason).toContain("found no mmproj*.gguf");
    // A's and B's are in the snapshot: "none in the snapshot" sent a user looking at them.
    expect(none.kind === "none" && none.reason).toContain("another model's folder's are not its");
  });

  test("a root model's projector in a folder of projectors only (`mmproj/`) is found, as pull brings it", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/apart-GGUF", {
      "model-Q4.gguf": tinyLlama(),
      "mmproj/mmproj-F16.gguf": mmproj(),
    });
    const model = modelInfo(await readGgufHeader(join(snapshot, "model-Q4.gguf")));
    expect(await findProjector("auto", model)).toMatchObject({
      kind: "found",
      info: { path: join(snapshot, "mmproj", "mmproj-F16.gguf") },
    });
  });

  test("a snapshot whose drive does not answer (a cache on a dead network mount) is not walked: auto finds none, saying why", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/vision-GGUF", {
      "vision.gguf": tinyLlama(),
      "mmproj-F16.gguf": mmproj(),
    });
    const model = modelInfo(await readGgufHeader(join(snapshot, "vision.gguf")));
    // The model's header was read; the snapshot's stat never answers now: a synchronous walk
    // (readdirSync) of it would hold the whole core, ping and cancel with it.
    let walks = 0;
    const found = await findProjector("auto", model, "model.mmproj", {
      stat: () => new Promise<void>(() => {}),
      statWaitMs: 1,
      snapshotFiles: async () => {
        walks++;
        return [];
      },
    });
    expect(found).toMatchObject({ kind: "none" });
    expect((found as { reason: string }).reason).toContain("hub snapshot: its drive did not answer");
    expect(walks).toBe(0);
  });

  test("a snapshot whose stat answered but whose walk never does ends the wait, walked once", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/vision-GGUF", { "vision.gguf": tinyLlama() });
    await listedOnceThoughHung(
      modelInfo(await readGgufHeader(join(snapshot, "vision.gguf"))),
      "snapshotFiles",
    );
  });

  test("a dangling projector link is passed over, named in the warning", async () => {
    using dir = tmpdir();
    const { snapshot } = layRepo(dir.path, "org/broken-GGUF", {
      "vision.gguf": tinyLlama(),
      "mmproj-F16.gguf": null,
    });
    const model = modelInfo(await readGgufHeader(join(snapshot, "vision.gguf")));
    const found = await findProjector("auto", model);
    expect(found.kind).toBe("none");
    expect((found as { warning: string }).warning).toContain("mmproj-F16.gguf: no such file");
  });
});

test("a folder the model lies in by a link is still the folder looked in", async () => {
  using dir = tmpdir();
  mkdirSync(join(dir.path, "real"));
  const path = writeGguf(join(dir.path, "real"), "m.gguf", tinyLlama());
  writeGguf(join(dir.path, "real"), "mmproj.gguf", mmproj());
  symlinkSync(join(dir.path, "real"), join(dir.path, "link"));
  const model = modelInfo(await readGgufHeader(join(dir.path, "link", "m.gguf")));
  expect(path).toContain("real");
  expect(await findProjector("auto", model)).toMatchObject({ kind: "found" });
});

test("a FIFO named like a projector beside the model is passed over at once, never read", async () => {
  using dir = tmpdir();
  const model = await modelIn(dir.path);
  const fifo = join(dir.path, "mmproj-fifo.gguf");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  const found = await findProjector("auto", model);
  expect(found.kind).toBe("none");
  expect((found as { warning: string }).warning).toContain("mmproj-fifo.gguf");
  const named = await coreErrorOf(findProjector(fifo, model));
  expect(named.data).toMatchObject({ projector: fifo, problem: "unreadable" });
});

test("mmproj: hf:org/name:file names a projector in the cache, as model.path would", async () => {
  using dir = tmpdir();
  const files = { "vision.gguf": tinyLlama(), "mmproj-F16.gguf": mmproj() };
  const { cache, snapshot, model } = await repoInCache(dir.path, "org/vision-GGUF", files, "vision.gguf");
  const found = await inCache(cache, () => findProjector("hf:org/vision-GGUF:mmproj-F16.gguf", model));
  expect(found).toMatchObject({
    kind: "found",
    source: "config",
    info: { path: join(snapshot, "mmproj-F16.gguf") },
  });
});

test("mmproj: hf: with its cache's stat not answering (a dead network mount) is unreadable, the cache not read", async () => {
  using dir = tmpdir();
  const files = { "vision.gguf": tinyLlama(), "mmproj-F16.gguf": mmproj() };
  const { cache, model } = await repoInCache(dir.path, "org/vision-GGUF", files, "vision.gguf");
  const asked: string[] = [];
  const stat = (path: string) => {
    asked.push(path);
    return new Promise<void>(() => {});
  };
  const err = await inCache(cache, () =>
    coreErrorOf(
      findProjector("hf:org/vision-GGUF:mmproj-F16.gguf", model, "model.mmproj", { stat, statWaitMs: 1 }),
    ),
  );
  expect(err).toMatchObject({
    code: "model_plan_error",
    data: { key: "model.mmproj", problem: "unreadable" },
  });
  expect(err.message).toContain("did not answer");
  // Only the cache folder was asked: the resolve's synchronous reads never ran.
  expect(asked).toEqual([cache]);
});

test("plan --model another file: that file's own projector (auto), not the configured model's", async () => {
  using dir = tmpdir();
  writeGguf(dir.path, "m.gguf", tinyLlama());
  writeGguf(dir.path, "wide-mmproj.gguf", mmproj({ width: 128 }));
  mkdirSync(join(dir.path, "other"));
  const other = writeGguf(join(dir.path, "other"), "o.gguf", tinyLlama());
  const proj = writeGguf(join(dir.path, "other"), "mmproj-o.gguf", mmproj());
  writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./m.gguf\n  mmproj: ./wide-mmproj.gguf\n");
  const source = {
    loadedConfig: () => loadConfig("config.yaml", dir.path),
    defaultConfig: () => defaultConfig(dir.path),
  };
  const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() } };
  const err = await coreErrorOf(planReportWithHub(source, {}, {}, deps));
  expect(err.data).toMatchObject({ problem: "width_mismatch", projector_width: 128, model_width: 64 });
  const report = await planReportWithHub(source, { model: other }, {}, deps);
  expect(report.plan.projector).toMatchObject({ path: proj, source: "auto" });
});

test("a pulled file's verdict looks for its own projector, and counts its memory", async () => {
  using dir = tmpdir();
  writeGguf(dir.path, "m.gguf", tinyLlama());
  writeGguf(dir.path, "wide-mmproj.gguf", mmproj({ width: 128 }));
  mkdirSync(join(dir.path, "other"));
  const other = writeGguf(join(dir.path, "other"), "o.gguf", tinyLlama());
  writeFileSync(
    join(dir.path, "config.yaml"),
    "model:\n  path: ./m.gguf\n  context: 2048\n  mmproj: ./wide-mmproj.gguf\n",
  );
  const { config } = loadConfig("config.yaml", dir.path);
  const deps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
  const alone = await fitVerdictFor(config, other, deps);
  expect(alone.fits).toBe(true);
  writeGguf(join(dir.path, "other"), "mmproj-o.gguf", mmproj());
  const withProjector = await fitVerdictFor(config, other, deps);
  expect(withProjector.fits).toBe(true);
  expect(withProjector.needed_bytes!).toBeGreaterThan(alone.needed_bytes!);
});

test("mmproj: hf:org/name matching several cached files names model.mmproj, not model.path", async () => {
  using dir = tmpdir();
  const files = { "a/m-Q4_K_M.gguf": tinyLlama(), "b/m-Q4_K_M.gguf": tinyLlama() };
  const { cache, model } = await repoInCache(dir.path, "org/m", files, "a/m-Q4_K_M.gguf");
  const err = await inCache(cache, () => coreErrorOf(findProjector("hf:org/m:Q4_K_M", model)));
  expect(err.code).toBe("config_invalid");
  expect(err.data).toMatchObject({ key: "model.mmproj" });
  expect(err.message).toStartWith("model.mmproj hf:org/m:Q4_K_M: 2 cached files match");
});

test("a malformed hf: mmproj is config_invalid at load, naming its key and line", () => {
  for (const [text, key, line] of [
    ['model:\n  mmproj: "hf:not a repo"\n', "model.mmproj", 2],
    ['models:\n  - name: b\n    path: x.gguf\n    mmproj: "hf:org/m:../x.gguf"\n', "models.0.mmproj", 4],
  ] as const) {
    const err = (() => {
      try {
        parseConfigText(text, "/c/config.yaml");
      } catch (e) {
        return e as CoreError;
      }
      throw new Error("loaded");
    })();
    expect(err).toMatchObject({ code: "config_invalid", data: { key, line } });
  }
  expect(
    parseConfigText("model:\n  mmproj: hf:org/m:mmproj-F16.gguf\n", "/c/config.yaml").config.model.mmproj,
  ).toBe("hf:org/m:mmproj-F16.gguf");
});

test("many projectors: the warning names the first twenty and counts them all, not a line of every name", async () => {
  using dir = tmpdir();
  const names = Array.from({ length: 30 }, (_, i) => `mmproj-${String(i).padStart(2, "0")}.gguf`);
  // Beside the model: none chosen; a folder of thousands made a plan warning of megabytes.
  const model = await modelIn(dir.path);
  for (const n of names) writeFileSync(join(dir.path, n), "");
  const beside = ((await findProjector("auto", model)) as { warning: string }).warning;
  expect(beside).toContain("mmproj-19.gguf, … (30 in all)");
  expect(beside).not.toContain("mmproj-20.gguf");
  // In a snapshot, each passed over for its width: named with why, twenty of them.
  const { snapshot } = layRepo(join(dir.path, "cache"), "org/many-GGUF", {
    "vision.gguf": tinyLlamaQ8(),
    ...Object.fromEntries(names.map((n) => [n, mmproj()])),
  });
  const inRepo = modelInfo(await readGgufHeader(join(snapshot, "vision.gguf")));
  const skipped = ((await findProjector("auto", inRepo)) as { warning: string }).warning;
  expect(skipped).toContain(
    "mmproj-19.gguf: its projection width 64 is not the model's embedding width 128; … (30 in all)",
  );
  expect(skipped).not.toContain("mmproj-20.gguf");
});
