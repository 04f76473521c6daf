import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { decideImageTokens, projectorComputeBytes } from "../../src/plan/decide/projector.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ProjectorInfo, projectorInfo, widthProblem } from "../../src/plan/projector.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import { mmproj, TINY_MMPROJ_PIXTRAL } from "../fixtures/gguf-mmproj.ts";
import { type GgufValue, tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { REAL_MODELS_DIR, realModelsSkip } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

async function info(spec = mmproj()): Promise<ProjectorInfo> {
  using dir = tmpdir();
  const read = projectorInfo(await readGgufHeader(writeGguf(dir.path, "mmproj.gguf", spec)));
  if ("problem" in read) throw new Error(read.detail);
  return read;
}

describe('a projector\'s header (docs/models.md "The projector")', () => {
  test("the fixed-size projector: its width, weights, and 64 tokens per image (recordings 103, 108)", async () => {
    const p = await info();
    expect(p.projector_type).toBe("mlp");
    expect(p.width).toBe(64);
    expect(p.file_type).toBe("F16");
    expect(p.weights_bytes).toBeGreaterThan(0);
    expect(p.tokens).toEqual({ mode: "fixed", count: 64 });
    expect(widthProblem(p, 64)).toBeNull();
    // Recording 105b: a 128-wide text model and a 64-wide projector.
    expect(widthProblem(p, 128)).toBe("its projection width 64 is not the model's embedding width 128");
  });

  test("pixtral's tokens grow with the image, 8 to 1024 by default, a separator after each row (recording 109)", async () => {
    const p = await info(mmproj(TINY_MMPROJ_PIXTRAL));
    expect(p.tokens).toEqual({ mode: "by_size", min: 8, max: 1024, rows_add_tokens: true });
  });

  test("a text model is not a projector (recording 105d), nor is one without a vision encoder or a width", async () => {
    using dir = tmpdir();
    const text = projectorInfo(await readGgufHeader(writeGguf(dir.path, "text.gguf", tinyLlama())));
    expect(text).toMatchObject({ problem: "not_projector" });
    expect((text as { detail: string }).detail).toContain("general.architecture llama");
    const audio = projectorInfo(
      await readGgufHeader(writeGguf(dir.path, "a.gguf", mmproj({ noVision: true }))),
    );
    expect(audio).toMatchObject({ problem: "not_projector" });
    const spec = mmproj();
    delete spec.metadata["clip.vision.projection_dim"];
    // Nor the output tensor the width is otherwise read from.
    spec.tensors = spec.tensors.filter((t) => t.name !== "mm.2.weight");
    const noWidth = projectorInfo(await readGgufHeader(writeGguf(dir.path, "w.gguf", spec)));
    expect(noWidth).toMatchObject({ problem: "no_width" });
  });
});

describe("a projector's counts", () => {
  test("NaN, infinite or negative is not a GGUF: a NaN merge made the plan's bytes and --cache-ram NaN", async () => {
    using dir = tmpdir();
    const cases: [string, GgufValue][] = [
      ["clip.vision.spatial_merge_size", { type: "f32", value: Number.NaN }],
      ["clip.vision.projector.scale_factor", { type: "f32", value: Number.NaN }],
      ["clip.vision.image_size", { type: "f32", value: Number.POSITIVE_INFINITY }],
      ["clip.vision.patch_size", { type: "i32", value: -3 }],
    ];
    for (const [i, [key, value]] of cases.entries()) {
      const path = writeGguf(
        dir.path,
        `p${i}.gguf`,
        mmproj({ ...TINY_MMPROJ_PIXTRAL, extra: { [key]: value } }),
      );
      const err = await readGgufHeader(path).then(
        () => undefined,
        (e: unknown) => e as CoreError,
      );
      expect(err).toMatchObject({ code: "model_missing", data: { problem: "not_gguf" } });
      expect(err?.message).toContain(`${key} is `);
    }
  });
});

describe("the encoder's compute buffer", () => {
  test("within a few times llama-server's own for both recorded projectors, never under it", async () => {
    const MIB = 2 ** 20;
    // Recording 108: `reserve_compute_meta: CPU compute buffer size = 0.10 MiB` (flash attention on).
    const fixed = projectorComputeBytes(await info(), true);
    expect(fixed).toBeGreaterThanOrEqual(0.1 * MIB);
    expect(fixed).toBeLessThan(4 * 0.1 * MIB);
    // The pixtral projector at its warm-up image (256 patches): 1.13 MiB; we count its largest, 1024.
    const pixtral = projectorComputeBytes(await info(mmproj(TINY_MMPROJ_PIXTRAL)), true);
    expect(pixtral).toBeGreaterThanOrEqual(1.13 * MIB);
    // Without flash attention every head's scores are counted too.
    expect(projectorComputeBytes(await info(mmproj(TINY_MMPROJ_PIXTRAL)), false)).toBeGreaterThan(pixtral);
  });
});

describe('the image token cap (docs/plan.md "Images cost context")', () => {
  test("by size: a quarter of the slot, halved for pixtral's row separators, passed as --image-max-tokens", async () => {
    const p = await info(mmproj(TINY_MMPROJ_PIXTRAL));
    const d = decideImageTokens(p, 2048);
    expect(d.value).toEqual({ max: 256, min: null });
    expect(d.decision.flags).toEqual(["--image-max-tokens", "256"]);
    expect(d.perImage).toBeLessThanOrEqual(2048 / 4);
  });

  test("no flag where the projector's own limit is within a quarter (a higher one only reserves more)", async () => {
    const d = decideImageTokens(await info(mmproj(TINY_MMPROJ_PIXTRAL)), 16384);
    expect(d.value).toEqual({ max: null, min: null });
    expect(d.decision.flags).toEqual([]);
  });

  test("a cap under the projector's least raises no conflict: the least is lowered with it", async () => {
    const p = await info(mmproj({ ...TINY_MMPROJ_PIXTRAL, projector: "lfm2" }));
    const d = decideImageTokens(p, 128);
    expect(d.value).toEqual({ max: 32, min: 32 });
    expect(d.decision.flags).toEqual(["--image-max-tokens", "32", "--image-min-tokens", "32"]);
  });

  test("a fixed projector has nothing to cap; more than a quarter is a warning (recording 109, last exchange)", async () => {
    const p = await info();
    expect(decideImageTokens(p, 2048)).toMatchObject({ value: { max: null, min: null }, perImage: 64 });
    expect(decideImageTokens(p, 2048).warning).toBeUndefined();
    expect(decideImageTokens(p, 128).warning).toContain("each image takes 64 tokens");
  });
});

const REAL = ["tiny-vision-mmproj.gguf", "tiny-vision-mmproj-pixtral.gguf", "tiny-vision.gguf"].map((f) =>
  join(REAL_MODELS_DIR, f),
);
const have = REAL.every((f) => existsSync(f));
const title = "llama.cpp's own projectors read as ours are written";
describe.skipIf(!have)(have ? title : realModelsSkip(title), () => {
  test("both real projectors project to the real vision model's width; pixtral's tokens go by size", async () => {
    const [fixed, pixtral] = await Promise.all(
      REAL.slice(0, 2).map(async (f) => projectorInfo(await readGgufHeader(f))),
    );
    const model = await readGgufHeader(REAL[2]!);
    expect(model.metadata["llama.embedding_length"]).toBe(64);
    expect(fixed).toMatchObject({
      projector_type: "mlp",
      width: 64,
      file_type: "F16",
      tokens: { mode: "fixed", count: 64 },
    });
    expect(pixtral).toMatchObject({
      projector_type: "pixtral",
      width: 64,
      tokens: { mode: "by_size", max: 1024 },
    });
    // Our fixture's shape reads the same way.
    const ours = await info();
    expect(ours.encoder).toEqual((fixed as ProjectorInfo).encoder);
  });

  test("recording 105b's pair: the real projector (64) against tiny-llama-q8.gguf (128) is refused by width", async () => {
    const q8 = await readGgufHeader(join(REAL_MODELS_DIR, "tiny-llama-q8.gguf"));
    const width = q8.metadata["llama.embedding_length"] as number;
    expect(width).toBe(128);
    const fixed = projectorInfo(await readGgufHeader(REAL[0]!)) as ProjectorInfo;
    expect(widthProblem(fixed, width)).toBe("its projection width 64 is not the model's embedding width 128");
  });
});
