import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { buffersOf, gpuBuffers } from "../../bench/gpu-memory/buffers.ts";
import { RECORDINGS } from "../fixtures/recordings-dir.ts";

const MIB = 2 ** 20;

describe("the GPU memory check's reading of llama-server's buffers (bench/gpu-memory)", () => {
  test("the recorded 8B-shaped start-up (memory/llama3-8b-shape-c8192-np1.log): mapped, repacked, KV, compute, output apart", () => {
    const log = readFileSync(join(RECORDINGS, "memory", "llama3-8b-shape-c8192-np1.log"), "utf8");
    const b = buffersOf(log);
    expect(b.CPU_Mapped?.model).toBe(Math.round(4320.8 * MIB));
    expect(b.CPU_REPACK?.model).toBe(Math.round(3744 * MIB));
    expect(b.CPU).toEqual({
      model: 0,
      kv: Math.round(1024 * MIB),
      compute: Math.round(124.01 * MIB),
      output: Math.round(0.49 * MIB),
    });
  });

  test("a CUDA device's lines as llama.cpp prints them (%12s / %10s names), its host staging kept apart; a projector's under clip", () => {
    const log = [
      "0.00.412.001 I load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
      "0.00.412.002 I load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
      "0.01.001.003 I llama_context:  CUDA_Host  output buffer size =     0.49 MiB",
      "0.01.002.004 I llama_kv_cache:      CUDA0 KV buffer size =  4096.00 MiB",
      "0.01.100.005 I sched_reserve:      CUDA0 compute buffer size =   258.50 MiB",
      "0.01.100.006 I sched_reserve:  CUDA_Host compute buffer size =    72.01 MiB",
      "0.01.200.007 I reserve_compute_meta:      CUDA0 compute buffer size =     3.13 MiB",
      "0.01.300.008 I srv  load_model: the model buffer size is not a buffer line",
    ].join("\n");
    const b = buffersOf(log);
    expect(gpuBuffers(b, "CUDA0")).toEqual({
      model: Math.round(4403.49 * MIB),
      kv: 4096 * MIB,
      compute: Math.round(258.5 * MIB),
      output: 0,
    });
    expect(b.CUDA_Host).toEqual({
      model: 0,
      kv: 0,
      compute: Math.round(72.01 * MIB),
      output: Math.round(0.49 * MIB),
    });
    expect(b["clip CUDA0"]?.compute).toBe(Math.round(3.13 * MIB));
    expect(gpuBuffers(b, "CUDA1")).toEqual({ model: 0, kv: 0, compute: 0, output: 0 });
  });
});
