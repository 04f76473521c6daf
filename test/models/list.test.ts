import { describe, expect, test } from "bun:test";
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findModel } from "../../src/config/choose-model.ts";
import { defaultConfig, loadConfig } from "../../src/config/load.ts";
import { listModels, listModelsFor, sortModels } from "../../src/models/list.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ModelEntry, ModelsResultSchema } from "../../src/protocol/models.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { llama7b, tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel, tinySplit } from "./cache-layout.ts";

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

// A snapshot link that leads back to itself (a hostile or damaged cache): named as a loop, not as
// a missing blob (a helper's note, sixth hostile look).
describe("models: a cache link that leads in a circle", () => {
  test("is broken_link saying it is a loop", async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    const { snapshot } = layRepo(cache, "org/m", { "m-Q4_K_M.gguf": tinyModel(), "m-F16.gguf": null });
    const looped = join(snapshot, "m-F16.gguf");
    rmSync(looped, { force: true });
    symlinkSync(join(snapshot, "m-BF16.gguf"), looped);
    symlinkSync(looped, join(snapshot, "m-BF16.gguf"));
    const result = await listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: cache },
      { probe },
    );
    const loop = result.models.find((m) => m.file === "m-F16.gguf");
    expect(loop).toMatchObject({ problem: "broken_link" });
    expect(loop?.verdict).toContain("leads in a circle");
  });
});

describe("models: a folder's link that leads nowhere", () => {
  test("is broken_link naming a link beside the config, not the cache's link to a blob", async () => {
    using dir = tmpdir();
    symlinkSync(join(dir.path, "gone.gguf"), join(dir.path, "dangling.gguf"));
    symlinkSync(join(dir.path, "b.gguf"), join(dir.path, "a.gguf"));
    symlinkSync(join(dir.path, "a.gguf"), join(dir.path, "b.gguf"));
    const result = await listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      { probe },
    );
    const byFile = new Map(result.models.map((m) => [m.file, m]));
    expect(byFile.get("dangling.gguf")).toMatchObject({ source: "folder", problem: "broken_link" });
    expect(byFile.get("dangling.gguf")?.verdict).toBe(
      `${join(dir.path, "dangling.gguf")}: the link points at a file that is not there`,
    );
    expect(byFile.get("a.gguf")?.verdict).toBe(
      `${join(dir.path, "a.gguf")}: the link leads in a circle (a symbolic-link loop)`,
    );
  });
});

describe.skipIf(process.platform !== "linux")("models: a file name that is not UTF-8", () => {
  test("is listed as unreadable for its name, not as absent: the file is there", async () => {
    using dir = tmpdir();
    // Latin-1's é, as an old archive or another system's copy leaves it: no UTF-8 text names it.
    const made = writeGguf(dir.path, "made.gguf", tinyModel());
    renameSync(
      made,
      Buffer.concat([Buffer.from(join(dir.path, "caf")), Buffer.from([0xe9, 0x2e]), Buffer.from("gguf")]),
    );
    const result = await listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      { probe },
    );
    expect(result.models).toHaveLength(1);
    expect(result.models[0]).toMatchObject({
      source: "folder",
      file: "caf\ufffd.gguf",
      problem: "unreadable",
    });
    expect(result.models[0]!.verdict).toContain("not valid UTF-8");
    expect(result.models[0]!.verdict).toContain("rename it");
  });

  test("a UTF-8 name that begins with a byte order mark keeps it: the file is read, not listed as absent", async () => {
    using dir = tmpdir();
    // U+FEFF is valid UTF-8 (EF BB BF); a name taken from a text file saved "with BOM" begins with it.
    writeGguf(dir.path, "\ufeffm.gguf", tinyModel());
    const result = await listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      { probe },
    );
    expect(result.models).toHaveLength(1);
    expect(result.models[0]!.file).toBe("\ufeffm.gguf");
    expect(result.models[0]!.problem).toBeNull();
  });
});

describe("models: a cache the hub did not write", () => {
  test("a cache folder no hub repo is named by, or a file no hf: reference can name, is listed by its path", async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    // models--a--b--c is no org/name; a file name with a control character no reference takes.
    const odd = layRepo(cache, "a/b/c", { "m-Q4_K_M.gguf": tinyModel() });
    const ctl = layRepo(cache, "org/m", { "m\u0001-Q8_0.gguf": tinyModel() });
    const config = defaultConfig(dir.path).config;
    const result = await listModels({ config, configDir: dir.path, cacheDir: cache }, { probe });
    // The model_path offered was hf:a/b/c:m-Q4_K_M.gguf, which every request then refused.
    expect(result.models.map((m) => m.model_path).sort()).toEqual(
      [join(odd.snapshot, "m-Q4_K_M.gguf"), join(ctl.snapshot, "m\u0001-Q8_0.gguf")].sort(),
    );
    for (const m of result.models) expect(() => findModel(config, m.model_path)).not.toThrow();
  });
});

describe("models: a ref's temp a killed pull left", () => {
  test("is no ref: the snapshot lists main only", async () => {
    // snapshot-link.ts writeRef: a core killed between the temp's write and its rename leaves
    // `.<pid>-<hex>.tmp` in refs/, holding the commit; it was listed as a ref named so.
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    const repo = layRepo(cache, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    writeFileSync(join(repo.root, "refs", ".4242-0123456789ab.tmp"), repo.commit);
    const config = defaultConfig(dir.path).config;
    const result = await listModels({ config, configDir: dir.path, cacheDir: cache }, { probe });
    expect(result.models.map((m) => m.refs)).toEqual([["main"]]);
  });
});

describe("models: every GGUF local-ai can see", () => {
  test("the cache and the config's folders, split models once, projectors left out, bad files with their reason", async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    const { snapshot, commit } = layRepo(cache, "org/m", {
      "m-Q4_K_M.gguf": tinyModel(),
      "m-Q8_0-00001-of-00002.gguf": tinySplit(7)[0],
      "m-Q8_0-00002-of-00002.gguf": tinySplit(7)[1],
      "m-F16.gguf": null,
      "mmproj-m-f16.gguf": tinyModel(1),
    });
    layRepo(cache, "org/cut", { "c-Q4_K_M-00001-of-00003.gguf": tinyModel() });
    const models = join(dir.path, "models");
    mkdirSync(models);
    writeGguf(models, "big-Q4_K_M.gguf", llama7b());
    writeGguf(models, "small.gguf", tinyModel(1, 2));
    writeFileSync(join(models, "junk.gguf"), "not a model");
    writeGguf(models, "cut.gguf", { ...tinyModel(), truncateBy: 1000 });
    // A folder link to a cached blob is the cache's model, listed once.
    symlinkSync(join(snapshot, "m-Q4_K_M.gguf"), join(models, "linked.gguf"));
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./models/small.gguf\n");
    const { config } = loadConfig("config.yaml", dir.path);

    const result = await listModels({ config, configDir: dir.path, cacheDir: cache }, { probe });
    expect(ModelsResultSchema.parse(result)).toEqual(result);
    expect(result.folders).toEqual([dir.path, models]);
    const byFile = new Map(result.models.map((m) => [m.file, m]));
    expect([...byFile.keys()].sort()).toEqual([
      "big-Q4_K_M.gguf",
      "c-Q4_K_M-00001-of-00003.gguf",
      "cut.gguf",
      "junk.gguf",
      "m-F16.gguf",
      "m-Q4_K_M.gguf",
      "m-Q8_0-00001-of-00002.gguf",
      "small.gguf",
    ]);
    expect(byFile.get("m-Q4_K_M.gguf")).toMatchObject({
      source: "hf_cache",
      repo: "org/m",
      commit,
      refs: ["main"],
      model_path: "hf:org/m:m-Q4_K_M.gguf",
      quantization: "Q4_K_M",
      architecture: "llama",
      fits: true,
      problem: null,
    });
    expect(byFile.get("m-Q8_0-00001-of-00002.gguf")).toMatchObject({ quantization: "Q8_0", fits: true });
    expect(byFile.get("m-Q8_0-00001-of-00002.gguf")!.files).toHaveLength(2);
    expect(byFile.get("small.gguf")).toMatchObject({
      source: "folder",
      configured: true,
      quantization: "F16",
    });
    expect(byFile.get("big-Q4_K_M.gguf")).toMatchObject({ fits: false, problem: null });
    expect(byFile.get("big-Q4_K_M.gguf")!.verdict).toStartWith("does not fit: ");
    expect(byFile.get("m-F16.gguf")).toMatchObject({ fits: null, problem: "broken_link" });
    expect(byFile.get("c-Q4_K_M-00001-of-00003.gguf")).toMatchObject({
      fits: null,
      problem: "incomplete_split",
    });
    expect(byFile.get("junk.gguf")).toMatchObject({ fits: null, problem: "not_gguf" });
    expect(byFile.get("cut.gguf")).toMatchObject({ fits: null, problem: "truncated" });

    // Fitting first, largest first; then what does not fit; then what could not be read.
    expect(result.models.map((m) => m.fits)).toEqual([true, true, true, false, null, null, null, null]);
    const fitting = result.models.filter((m) => m.fits);
    expect(fitting.map((m) => m.size_bytes)).toEqual(
      [...fitting.map((m) => m.size_bytes)].sort((a, b) => b - a),
    );
  });

  test("the configured hf: model is marked; no config file lists with the defaults; an empty machine lists nothing", async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    layRepo(cache, "org/m", { "m-Q4_K_M.gguf": tinyModel() });
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/m:Q4_K_M\n");
    const source = {
      loadedConfig: () => loadConfig("config.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const listed = await listModelsFor(source, { HF_HUB_CACHE: cache }, { probe });
    expect(listed.models).toHaveLength(1);
    expect(listed.models[0]).toMatchObject({ configured: true, model_path: "hf:org/m:m-Q4_K_M.gguf" });
    // The hf: model lives in the cache: only the config's own folder is scanned besides.
    expect(listed.folders).toEqual([dir.path]);

    const none = {
      loadedConfig: () => loadConfig("absent.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    let probed = 0;
    const empty = await listModelsFor(
      none,
      { HF_HUB_CACHE: join(dir.path, "nothing") },
      {
        probe: async () => {
          probed++;
          return cpuOnlyMachine();
        },
      },
    );
    expect(empty.models).toEqual([]);
    expect(probed).toBe(0);
    writeFileSync(join(dir.path, "bad.yaml"), "model: [\n");
    const bad = {
      loadedConfig: () => loadConfig("bad.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    await expect(listModelsFor(bad, {}, { probe })).rejects.toMatchObject({ code: "config_invalid" });
  });

  test("the order: fits (largest first), does not fit (smallest first), unreadable (by path)", () => {
    const e = (path: string, fits: boolean | null, size: number) =>
      ({ path, fits, size_bytes: size }) as ModelEntry;
    const sorted = sortModels([
      e("/u2", null, 1),
      e("/n-big", false, 90),
      e("/f-small", true, 10),
      e("/u1", null, 5),
      e("/n-small", false, 50),
      e("/f-big", true, 40),
    ]);
    expect(sorted.map((m) => m.path)).toEqual(["/f-big", "/f-small", "/n-small", "/n-big", "/u1", "/u2"]);
  });

  test('vision: a model whose projector setting finds one of its width reads images (docs/models.md "The projector")', async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    mkdirSync(cache);
    const seeing = join(dir.path, "seeing");
    mkdirSync(seeing);
    writeGguf(seeing, "vision.gguf", tinyLlama());
    writeGguf(seeing, "mmproj-vision-f16.gguf", mmproj());
    // Beside the config: a text model whose only projector is of another width.
    writeGguf(dir.path, "text.gguf", tinyLlama());
    writeGguf(dir.path, "mmproj-wide.gguf", mmproj({ width: 4096 }));
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./seeing/vision.gguf\n");
    const { config } = loadConfig("config.yaml", dir.path);
    const result = await listModels({ config, configDir: dir.path, cacheDir: cache }, { probe });
    const byFile = new Map(result.models.map((m) => [m.file, m]));
    expect(byFile.get("vision.gguf")!.vision).toBe(true);
    expect(byFile.get("text.gguf")!.vision).toBe(false);
    // Projectors are never listed as models.
    expect([...byFile.keys()].some((f) => f.startsWith("mmproj"))).toBe(false);
  });
});

// A split cut short names at most 10 of its missing parts (pick-gguf.ts MISSING_NAMED), but its
// entry still lists every part on disk: a host that offers to delete a broken split by `files`
// left parts 12 to 20 behind, and `size_bytes` did not count them.
describe("models: a split with more missing parts than are named", () => {
  test("lists the parts on disk past the tenth missing one, and says more are missing", async () => {
    using dir = tmpdir();
    const name = (i: number) => `big-Q4_K_M-${String(i).padStart(5, "0")}-of-00030.gguf`;
    const present = [1, ...Array.from({ length: 9 }, (_, i) => i + 12), 25];
    for (const i of present) writeFileSync(join(dir.path, name(i)), "x".repeat(100));
    const config = defaultConfig(dir.path).config;
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "c") },
      { probe },
    );
    const entry = result.models.find((m) => m.file === name(1));
    expect(entry).toMatchObject({ problem: "incomplete_split", size_bytes: 100 * present.length });
    for (const i of present) expect(entry!.files).toContain(join(dir.path, name(i)));
    expect(entry!.verdict).toContain("…");
  });
});

describe("models: a folder of many GGUFs", () => {
  test("gives the loop back between files: what waits on it (a ping, a shutdown) is not held to the end", async () => {
    using dir = tmpdir();
    for (let i = 0; i < 3; i++) writeGguf(dir.path, `m${i}.gguf`, tinyLlama());
    let read = 0;
    const readHeader = async (path: string) => {
      read++;
      return readGgufHeader(path);
    };
    // Queued before the listing starts: it runs at the loop's next turn. Each header and plan
    // (some 2 ms) was done in one turn, so 10,000 files held a ping some 20 s.
    let readWhenLoopRan = -1;
    setImmediate(() => {
      readWhenLoopRan = read;
    });
    const result = await listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      { probe, readHeader },
    );
    expect(result.models).toHaveLength(3);
    expect(readWhenLoopRan).toBeGreaterThanOrEqual(0);
    expect(readWhenLoopRan).toBeLessThan(3);
  });
});
