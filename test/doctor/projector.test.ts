import { describe, expect, test } from "bun:test";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { tinyLlama, tinyLlamaQ8, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { checkById, coreWithConfig, doctorDeps } from "./helpers/config-core.ts";

// doctor names a projector that cannot serve its model (recordings 105b–105d), not a chat.

describe("doctor's projector check (docs/doctor.md)", () => {
  test("a configured projector of another width (105b) fails naming it and both widths; the plan is skipped", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "q8.gguf", tinyLlamaQ8());
    const proj = writeGguf(dir.path, "tiny-vision-mmproj.gguf", mmproj());
    const r = await runDoctor(
      coreWithConfig(dir.path, "model:\n  path: ./q8.gguf\n  mmproj: ./tiny-vision-mmproj.gguf\n"),
      doctorDeps,
    );
    expect(r.ok).toBe(false);
    const check = checkById(r, "projector")!;
    expect(check.status).toBe("fail");
    expect(check.message).toContain(proj);
    expect(check.message).toContain("projection width 64");
    expect(check.message).toContain("embedding width 128");
    expect(check.fix).toContain("model.mmproj");
    expect(check.data).toMatchObject({
      code: "model_plan_error",
      projector: proj,
      projector_width: 64,
      model_width: 128,
    });
    expect(checkById(r, "plan")).toMatchObject({ status: "skip" });
    // Its place: right after the model it serves.
    const ids = r.checks.map((c) => c.id);
    expect(ids.indexOf("projector")).toBe(ids.indexOf("model") + 1);
  });

  test("a missing file (105c) and a text model (105d) on a models entry fail under projector:<name>", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    writeGguf(dir.path, "v.gguf", tinyLlama());
    writeGguf(dir.path, "tiny-llama.gguf", tinyLlama());
    const yaml =
      "model:\n  path: ./m.gguf\n  mmproj: ./gone-mmproj.gguf\nmodels:\n  - name: v\n    path: ./v.gguf\n    mmproj: ./tiny-llama.gguf\n";
    const r = await runDoctor(coreWithConfig(dir.path, yaml), doctorDeps);
    expect(checkById(r, "projector")).toMatchObject({
      status: "fail",
      data: { problem: "absent", model_width: 64 },
    });
    const named = checkById(r, "projector:v")!;
    expect(named).toMatchObject({ status: "fail", data: { problem: "not_projector", model: "v" } });
    expect(named.fix).toContain("models.0.mmproj");
  });

  test("a matching projector beside the model: ok, and the plan's argv has --mmproj", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "vision.gguf", tinyLlama());
    const proj = writeGguf(dir.path, "mmproj-vision-f16.gguf", mmproj());
    const r = await runDoctor(coreWithConfig(dir.path, "model:\n  path: ./vision.gguf\n"), doctorDeps);
    expect(checkById(r, "projector")).toMatchObject({
      status: "ok",
      data: { path: proj, width: 64, source: "auto" },
    });
    const argv = checkById(r, "plan")!.data!.argv as string[];
    expect(argv[argv.indexOf("--mmproj") + 1]).toBe(proj);
  });

  test("a text model with nothing beside it has no projector line at all", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    const r = await runDoctor(coreWithConfig(dir.path, "model:\n  path: ./m.gguf\n"), doctorDeps);
    expect(checkById(r, "projector")).toBeUndefined();
    expect(checkById(r, "plan")!.status).not.toBe("fail");
  });
});
