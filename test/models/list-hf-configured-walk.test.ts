import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";
import { ListingWhole } from "./listing-whole.ts";

// The config's `hf:` model.path was resolved with synchronous reads (its ref file, the snapshot's
// walk) even when the cache answered: a ref whose read off the loop did not answer is not in
// left_out (docs/models.md "What was left out"), so nothing kept the synchronous read of it, on a
// share gone offline, from hanging the core. The walk already found where the reference leads.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });
const SYNC = ["statSync", "lstatSync", "openSync", "existsSync", "readdirSync", "readFileSync"] as const;
let spies: { mockRestore(): void; mock: { calls: unknown[][] } }[] = [];

afterEach(() => {
  for (const s of spies) s.mockRestore();
  spies = [];
});

describe("models: a configured hf: reference", () => {
  test("is found from the walk: marked configured and named, no synchronous read of refs or listing", async () => {
    using dir = tmpdir();
    const cacheDir = join(dir.path, "hub");
    const repo = layRepo(cacheDir, "org/m", { "m-Q4_K_M.gguf": tinyModel(), "m-Q8_0.gguf": tinyModel() });
    const config = parseConfigText(
      "model:\n  path: hf:org/m:Q4_K_M\nmodels:\n  - name: big\n    path: hf:org/m:m-Q8_0.gguf\n",
      join(dir.path, "config.yaml"),
    ).config;
    spies = SYNC.map((name) => spyOn(fs, name));
    const result = await listModels(
      { config, configDir: dir.path, cacheDir },
      { probe, drives: new ListingWhole({ statWaitMs: 1000 }) },
    );
    const byFile = Object.fromEntries(result.models.map((m) => [m.file, m]));
    expect(byFile["m-Q4_K_M.gguf"]?.configured).toBe(true);
    expect(byFile["m-Q4_K_M.gguf"]?.name).toBe("default");
    expect(byFile["m-Q8_0.gguf"]?.name).toBe("big");
    const refs = join(repo.root, "refs");
    const touched = spies.flatMap((s, i) =>
      s.mock.calls
        .map((c) => String(c[0]))
        .filter((p) => p.startsWith(refs) || (SYNC[i] === "readdirSync" && p.startsWith(cacheDir))),
    );
    expect(touched).toEqual([]);
  });
});
