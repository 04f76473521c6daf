import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { canonicalPath } from "../../src/config/choose-model.ts";
import { defaultConfig } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { tinyModel } from "./cache-layout.ts";

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

// On Windows one folder has many spellings (case, 8.3 short name, subst drive, `\\?\`), and Bun's
// plain realpathSync keeps each as given (measured under Wine) where the native one answers the
// name on disk. Here a link stands for the second spelling, and the plain call is made to keep it
// as Windows' does.
describe("models: one file spelled two ways (Windows)", () => {
  let spy: ReturnType<typeof spyOn> | undefined;
  afterEach(() => spy?.mockRestore());

  function plainKeepsSpelling(): void {
    const real = fs.realpathSync;
    spy = spyOn(fs, "realpathSync").mockImplementation(((p: string) => {
      real(p); // there, or the error it throws
      return p;
    }) as typeof fs.realpathSync);
    Object.assign(fs.realpathSync, { native: real.native });
  }

  function stack(root: string): { onDisk: string; other: string } {
    const onDisk = join(root, "Models");
    fs.mkdirSync(onDisk);
    fs.symlinkSync(onDisk, join(root, "MODELS"));
    writeGguf(onDisk, "m.gguf", tinyModel());
    return { onDisk, other: join(root, "MODELS") };
  }

  test("the config's folder and model.path's folder, one folder spelled two ways: each model listed once", async () => {
    using dir = tmpdir();
    const { onDisk, other } = stack(dir.path);
    plainKeepsSpelling();
    const config = defaultConfig(onDisk).config;
    config.model.path = join(other, "m.gguf");
    const result = await listModels(
      { config, configDir: onDisk, cacheDir: join(dir.path, "cache") },
      { probe },
    );
    expect(result.models.map((m) => m.file)).toEqual(["m.gguf"]);
    // The folder too is listed once, as the config's folder spells it.
    expect(result.folders).toEqual([onDisk]);
  });

  test("the model loaded (its path as the runtime holds it: on disk) is marked loaded however the folder is spelled", async () => {
    using dir = tmpdir();
    const { other } = stack(dir.path);
    plainKeepsSpelling();
    const loaded = [canonicalPath(join(other, "m.gguf"))];
    const config = defaultConfig(other).config;
    const result = await listModels(
      { config, configDir: other, cacheDir: join(dir.path, "cache"), loaded },
      { probe },
    );
    expect(result.models.map((m) => [m.file, m.loaded])).toEqual([["m.gguf", true]]);
  });
});
