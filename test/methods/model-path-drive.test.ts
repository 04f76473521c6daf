import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { answeringFiles, findModel } from "../../src/config/choose-model.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { chat } from "../../src/methods/chat.ts";
import { embed } from "../../src/methods/embed.ts";
import { modelsLoad } from "../../src/methods/models-load.ts";
import { modelsUnload } from "../../src/methods/models-unload.ts";
import { modelFiles } from "../../src/models/model-files.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { DriveAnswers, drives } from "../../src/util/drive-answers.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "../models/cache-layout.ts";

// A request's model path on a dead network mount: its realpath (synchronous) hung for minutes and
// held the whole core, ping and cancel too. The drive is asked off the loop first.

afterEach(() => {
  (fs.realpathSync.native as unknown as { mockRestore?: () => void }).mockRestore?.();
  (drives.answers as unknown as { mockRestore?: () => void }).mockRestore?.();
});

const never = new AbortController().signal;
const ctx = { id: "r", signal: never, stopping: never, emit: () => true } as never;

const methods = [
  (model: string, services: never, c = ctx) =>
    chat.run(chat.params.parse({ input: "hi", model }), c, services),
  (model: string, services: never, c = ctx) =>
    embed.run(embed.params.parse({ input: "hi", model }), c, services),
  (model: string, services: never, c = ctx) =>
    modelsLoad.run(modelsLoad.params.parse({ model }), c, services),
  (model: string, services: never, c = ctx) =>
    modelsUnload.run(modelsUnload.params.parse({ model }), c, services),
];

describe("a request's model path whose drive does not answer", () => {
  test("no synchronous realpath runs while its stat is out; once the wait is over it is model_missing", async () => {
    using dir = tmpdir();
    const text = "models:\n  - {name: e, kind: embedding, path: ./e.gguf}\n";
    const config = parseConfigText(text, join(dir.path, "config.yaml")).config;
    const services = { config: () => config } as never;
    const far = "/mnt/offline/model.gguf";
    const realpath = spyOn(fs.realpathSync, "native");
    for (const run of methods) {
      let answer = (_answers: boolean) => {};
      const asked: string[] = [];
      spyOn(drives, "answers").mockImplementation((path: string) => {
        asked.push(path);
        return new Promise<boolean>((resolve) => {
          if (path === far) answer = resolve;
          else resolve(true);
        });
      });
      const outcome = Promise.resolve(run(far, services)).then(
        () => null,
        (e: unknown) => e,
      );
      // The loop is free (a ping answers) and nothing synchronous touched the drive.
      await new Promise((resolve) => setImmediate(resolve));
      expect(realpath).not.toHaveBeenCalled();
      expect(asked).toContain(far);
      answer(false);
      expect(await outcome).toMatchObject({
        code: "model_missing",
        data: { path: far, problem: "unreadable", field: "model" },
      });
      expect(realpath).not.toHaveBeenCalled();
    }
  });
});

/** A config whose model `far` lies on a drive that does not answer (its stat never comes). */
function farModel(dir: string) {
  const text = "models:\n  - {name: far, path: /mnt/offline/far.gguf}\n";
  const config = parseConfigText(text, join(dir, "config.yaml")).config;
  const silent = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1 });
  const answers = spyOn(silent, "answers").mockImplementation(
    async (path) => path !== "/mnt/offline/far.gguf",
  );
  return { config, silent, answers };
}

describe("a configured model's file whose drive does not answer", () => {
  test("a request's path is still served; the silent file is matched by its spelling, not realpath", async () => {
    using dir = tmpdir();
    fs.writeFileSync(join(dir.path, "near.gguf"), "GGUF");
    const { config, silent, answers } = farModel(dir.path);
    const realpath = spyOn(fs.realpathSync, "native");
    const files = await answeringFiles(config, join(dir.path, "near.gguf"), {
      ...modelFiles,
      drives: silent,
    });
    expect(findModel(config, join(dir.path, "near.gguf"), files)).toMatchObject({ kind: "path" });
    expect(findModel(config, "/mnt/offline/far.gguf", files)).toMatchObject({
      kind: "configured",
      name: "far",
    });
    expect(realpath.mock.calls.map((c) => c[0])).not.toContain("/mnt/offline/far.gguf");
    // A name asks no drive at all: a chat by name costs no stat.
    answers.mockClear();
    await answeringFiles(config, "far", { ...modelFiles, drives: silent });
    expect(answers).not.toHaveBeenCalled();
  });
});

describe("a request cancelled while its model path's stat hangs", () => {
  test("chat, embed, models.load and models.unload end cancelled at once, not after the drive's wait", async () => {
    using dir = tmpdir();
    const text = "models:\n  - {name: e, kind: embedding, path: ./e.gguf}\n";
    const config = parseConfigText(text, join(dir.path, "config.yaml")).config;
    const services = { config: () => config } as never;
    const far = "/mnt/offline/model.gguf";
    for (const run of methods) {
      // The far path's stat never answers (its 30 s wait never passes in this test).
      spyOn(drives, "answers").mockImplementation((path: string) =>
        path === far ? new Promise<boolean>(() => {}) : Promise.resolve(true),
      );
      const controller = new AbortController();
      const cancelled = { ...(ctx as object), signal: controller.signal } as never;
      const outcome = Promise.resolve(run(far, services, cancelled)).then(
        () => null,
        (e: unknown) => e,
      );
      await new Promise((resolve) => setImmediate(resolve));
      controller.abort(new Error("cancelled by the host"));
      expect(await outcome).toMatchObject({ message: "cancelled by the host" });
      (drives.answers as unknown as { mockRestore: () => void }).mockRestore();
    }
  });
});

test("a path refused unasked, every stat lane held by other dead paths, says so", async () => {
  using dir = tmpdir();
  const config = parseConfigText("", join(dir.path, "config.yaml")).config;
  const held = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1, lanes: 1 });
  expect(await held.statOf("/mnt/offline/a.gguf")).toBe("late");
  const near = join(dir.path, "near.gguf");
  const refused = await answeringFiles(config, near, { ...modelFiles, drives: held }).catch((e) => e);
  expect(refused).toMatchObject({ code: "model_missing", data: { path: near, problem: "unreadable" } });
  expect(refused.message).toContain("not asked while other paths' drives do not answer");
});

describe("a request's hf: reference to a cached file, a configured model's file on a silent drive", () => {
  const before = process.env.HF_HUB_CACHE;
  afterEach(() => {
    if (before === undefined) delete process.env.HF_HUB_CACHE;
    else process.env.HF_HUB_CACHE = before;
  });

  test("the configured file is matched by its spelling: no synchronous realpath reaches its drive", async () => {
    using dir = tmpdir();
    layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    process.env.HF_HUB_CACHE = dir.path;
    const { config, silent, answers } = farModel(dir.path);
    const realpath = spyOn(fs.realpathSync, "native");
    // The reference is matched as its cached file is, against every configured file (choose-model.ts byFile).
    const ref = "hf:org/m:m-Q4_K_M.gguf";
    const files = await answeringFiles(config, ref, { ...modelFiles, drives: silent });
    expect(findModel(config, ref, files)).toMatchObject({ kind: "path" });
    expect(realpath.mock.calls.map((c) => c[0])).not.toContain("/mnt/offline/far.gguf");
    expect(answers.mock.calls.map((c) => c[0])).toContain("/mnt/offline/far.gguf");
  });
});

describe("the Hugging Face cache's drive does not answer", () => {
  const before = process.env.HF_HUB_CACHE;
  afterEach(() => {
    if (before === undefined) delete process.env.HF_HUB_CACHE;
    else process.env.HF_HUB_CACHE = before;
    (modelFiles.cached as unknown as { mockRestore?: () => void }).mockRestore?.();
  });

  test("no synchronous cache read: a reference is taken as given, a configured one matched by its spelling", async () => {
    using dir = tmpdir();
    layRepo(dir.path, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    process.env.HF_HUB_CACHE = dir.path;
    const text = "models:\n  - {name: hub, path: 'hf:org/m:Q4_K_M'}\n";
    const config = parseConfigText(text, join(dir.path, "config.yaml")).config;
    const silent = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1 });
    const answers = spyOn(silent, "answers").mockImplementation(async (path) => path !== dir.path);
    // resolve.ts reads the cache synchronously: a dead mount held the whole core there.
    const cached = spyOn(modelFiles, "cached");
    const near = join(dir.path, "near.gguf");
    fs.writeFileSync(near, "GGUF");
    for (const ref of ["hf:org/m:m-Q4_K_M.gguf", near]) {
      const files = await answeringFiles(config, ref, { ...modelFiles, drives: silent });
      expect(findModel(config, ref, files)).toMatchObject({ kind: "path" });
    }
    expect(answers.mock.calls.map((c) => c[0])).toContain(dir.path);
    expect(cached).not.toHaveBeenCalled();
  });
});

test("a plan by a path whose drive does not answer ends at its signal (the core's stop), not the drive's wait", async () => {
  using dir = tmpdir();
  const config = parseConfigText("", join(dir.path, "config.yaml"));
  const far = "/mnt/offline/model.gguf";
  spyOn(drives, "answers").mockImplementation((path: string) =>
    path === far ? new Promise<boolean>(() => {}) : Promise.resolve(true),
  );
  const stop = new AbortController();
  const source = { loadedConfig: () => config, defaultConfig: () => config };
  const planned = planReportWithHub(source as never, { model: far }, {}, { signal: stop.signal });
  await new Promise((resolve) => setImmediate(resolve));
  stop.abort(new Error("the core is shutting down"));
  expect(await planned.catch((e: unknown) => e)).toMatchObject({ message: "the core is shutting down" });
});
