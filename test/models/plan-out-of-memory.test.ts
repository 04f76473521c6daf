import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig, loadConfig } from "../../src/config/load.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, testGpu } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `plan` after starts that ran out of GPU memory (docs/supervisor.md, "Out of GPU memory at
// start-up"): a configured model's plan keeps the margin its next start would keep; another
// file's plan is not that server's.

test("a configured model's plan keeps the margin its server's next start keeps; another file's does not", async () => {
  using dir = tmpdir();
  writeGguf(dir.path, "m.gguf", tinyLlama());
  const other = writeGguf(dir.path, "o.gguf", tinyLlama());
  writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./m.gguf\n");
  const ranOut: string[] = [];
  const source = {
    loadedConfig: () => loadConfig("config.yaml", dir.path),
    defaultConfig: () => defaultConfig(dir.path),
    outOfMemoryStarts: (model: string) => {
      ranOut.push(model);
      return 2;
    },
  };
  const deps = { plan: { ...defaultPlanDeps, probe: async () => cpuOnlyMachine({ gpus: [testGpu()] }) } };
  const margin = (w: string) => w.includes("ran out of memory starting this model");
  const planned = await planReportWithHub(source, {}, {}, deps);
  expect(planned.plan.warnings.filter(margin)).toEqual([expect.stringContaining("(2 times)")]);
  expect(ranOut).toEqual(["default"]);
  const fresh = await planReportWithHub({ ...source, outOfMemoryStarts: () => 0 }, {}, {}, deps);
  expect(fresh.plan.warnings.filter(margin)).toEqual([]);
  const file = await planReportWithHub(source, { model: other }, {}, deps);
  expect(file.plan.warnings.filter(margin)).toEqual([]);
  expect(ranOut).toEqual(["default"]);
});
