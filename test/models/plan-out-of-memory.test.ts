import { expect, test } from "bun:test";
import { realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig, loadConfig } from "../../src/config/load.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, testGpu } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `plan` after starts that ran out of GPU memory (docs/supervisor.md, "Out of GPU memory at
// start-up"): a model's plan keeps the margin its next start would keep, a configured model's
// by its name, a model loaded by path by the name a chat loads it under (its real path).

test("a plan keeps the margin of the model it plans: configured by name, a file by its path", async () => {
  using dir = tmpdir();
  writeGguf(dir.path, "m.gguf", tinyLlama());
  const other = writeGguf(dir.path, "o.gguf", tinyLlama());
  const third = writeGguf(dir.path, "t.gguf", tinyLlama());
  writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./m.gguf\n");
  const asked: string[] = [];
  const counts = new Map([
    ["default", 2],
    [realpathSync(other), 1],
  ]);
  const source = {
    loadedConfig: () => loadConfig("config.yaml", dir.path),
    defaultConfig: () => defaultConfig(dir.path),
    outOfMemoryStarts: (model: string) => {
      asked.push(model);
      return counts.get(model) ?? 0;
    },
  };
  const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine({ gpus: [testGpu()] }) } };
  const margin = async (options: { model?: string }, from = source) =>
    (await planReportWithHub(from, options, {}, deps)).plan.warnings.filter((w) =>
      w.includes("ran out of memory starting this model"),
    );
  expect(await margin({})).toEqual([expect.stringContaining("(2 times)")]);
  expect(asked).toEqual(["default"]);
  expect(await margin({}, { ...source, outOfMemoryStarts: () => 0 })).toEqual([]);
  // Loaded by path, it ran out once: its plan keeps that margin; a file never loaded keeps none.
  expect(await margin({ model: other })).toEqual([expect.stringContaining("(once)")]);
  expect(await margin({ model: third })).toEqual([]);
  // The configured model's own file, given by path, is the model a chat would load: `default`.
  expect(await margin({ model: join(dir.path, "m.gguf") })).toEqual([expect.stringContaining("(2 times)")]);
  expect(asked).toEqual(["default", realpathSync(other), realpathSync(third), "default"]);
});
