import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { makePlan } from "../../src/plan/planner.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { denseModel, F16, tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// issue 10 item 2: llama-server refuses a quantized KV cache type whose block size does not
// divide the head size (`K cache type q8_0 with block size 32 does not divide n_embd_head_k=16`,
// test/fixtures/llama-server/README.md); the plan must never ask for one.

const config = (llama: Record<string, unknown> = {}) => ConfigSchema.parse({ llama });

async function head16(): Promise<ModelInfo> {
  using dir = tmpdir();
  const spec = denseModel({
    arch: "llama",
    layers: 4,
    embd: 64,
    heads: 4,
    kvHeads: 4,
    ff: 256,
    vocab: 512,
    ctx: 2048,
    type: F16,
  });
  return modelInfo(await readGgufHeader(writeGguf(dir.path, "head16.gguf", spec)));
}

function refusals(model: () => Promise<ModelInfo>) {
  test("llama.cache_type_k q8_0 is model_plan_error naming the key, the block and the head size", async () => {
    const m = await model();
    expect(m.head_dim_k).toBe(16);
    const e = coreErrorOf(() => makePlan(m, cpuOnlyMachine(), config({ cache_type_k: "q8_0" })));
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toContain("llama.cache_type_k q8_0");
    expect(e.message).toContain("blocks of 32");
    expect(e.message).toContain("K head size (n_embd_head_k) is 16");
    expect(e.message).toContain("f32, f16, bf16");
    expect(e.data).toEqual({ key: "llama.cache_type_k", cache_type: "q8_0", block_size: 32, head_size: 16 });
  });

  test("a quantized V cache is checked against the V head size", async () => {
    const m = await model();
    const e = coreErrorOf(() => makePlan(m, cpuOnlyMachine(), config({ cache_type_v: "q4_0" })));
    expect(e.code).toBe("model_plan_error");
    expect(e.data).toMatchObject({ key: "llama.cache_type_v", cache_type: "q4_0", head_size: 16 });
    expect(e.message).toContain("V head size (n_embd_head_v) is 16");
  });

  test("the default plan keeps f16 and does not suggest a type llama-server would refuse", async () => {
    const p = makePlan(await model(), cpuOnlyMachine(), config());
    expect(p.argv.join(" ")).toContain("--cache-type-k f16 --cache-type-v f16");
    const reason = p.decisions.find((d) => d.name === "cache_types")!.reason;
    expect(reason).not.toContain("q8_0 to halve");
    expect(reason).toContain("K 16, V 16");
  });
}

describe("KV cache block size: a synthetic model with head size 16", () => {
  refusals(head16);
});

// The shape of the model llama-server refused q8_0 on, written by the project's own writer.
describe("KV cache block size: tiny-llama.gguf's shape", () => {
  refusals(async () => {
    using dir = tmpdir();
    return modelInfo(await readGgufHeader(writeGguf(dir.path, "tiny-llama.gguf", tinyLlama())));
  });
});
