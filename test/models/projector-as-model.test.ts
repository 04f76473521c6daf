import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { listModels } from "../../src/models/list.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { planFor } from "../../src/plan/planner.ts";
import { isCoreError } from "../../src/protocol/errors.ts";
import { checkById, coreWithConfig, doctorDeps } from "../doctor/helpers/config-core.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A projector whose name does not start with "mmproj" (second-state's
// llava-v1.5-7b-mmproj-model-f16.gguf, llama.cpp's own tiny-vision-mmproj.gguf) is still a
// projector: llama-server refuses it as -m ("CLIP cannot be used as main model, use it with
// --mmproj instead"), so it is never listed, checked or planned as a model (docs/models.md).

describe("a projector is not a model, whatever its name", () => {
  test("models leaves it out, as it does mmproj-*.gguf", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    writeGguf(dir.path, "llava-v1.5-7b-mmproj-model-f16.gguf", mmproj());
    const config = ConfigSchema.parse({ model: { path: join(dir.path, "m.gguf") } });
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "no-cache") },
      { probe: async () => cpuOnlyMachine() },
    );
    expect(result.models.map((m) => m.file)).toEqual(["m.gguf"]);
  });

  test("the plan refuses it as model_plan_error saying to name it in mmproj", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "tiny-vision-mmproj.gguf", mmproj());
    const model = modelInfo(await readGgufHeader(path));
    let err: unknown;
    try {
      planFor(model, cpuOnlyMachine(), ConfigSchema.parse({ model: { path } }));
    } catch (e) {
      err = e;
    }
    expect(isCoreError(err) && err.code).toBe("model_plan_error");
    expect((err as Error).message).toContain(path);
    expect((err as Error).message).toContain("mmproj");
  });

  test("doctor fails its model check with the fix, and skips the plan", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "tiny-vision-mmproj.gguf", mmproj());
    const r = await runDoctor(
      coreWithConfig(dir.path, "model:\n  path: ./tiny-vision-mmproj.gguf\n"),
      doctorDeps,
    );
    expect(r.ok).toBe(false);
    const check = checkById(r, "model")!;
    expect(check.status).toBe("fail");
    expect(check.message).toContain("projector");
    expect(check.fix).toContain("model.mmproj");
    expect(check.data).toMatchObject({ code: "model_plan_error", architecture: "clip" });
    expect(checkById(r, "plan")).toMatchObject({ status: "skip" });
    expect(r.checks.filter((c) => c.status === "fail").map((c) => c.id)).toEqual(["model"]);
  });
});
