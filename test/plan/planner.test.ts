import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type GpuInfo, type HardwareSnapshot, parseNvidiaSmi } from "../../src/plan/hardware.ts";
import { reconcileGpus } from "../../src/plan/listed-devices.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { makePlan } from "../../src/plan/planner.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import {
  deepseek2,
  gemma3,
  llama7b,
  llama8b,
  mixtral8x7b,
  tinyLlama,
  writeGguf,
} from "../fixtures/gguf-writer.ts";
import { GIB, testGpu } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

function hw(
  ramGiB: number,
  gpus: Partial<GpuInfo>[] = [],
  over: Partial<HardwareSnapshot> = {},
): HardwareSnapshot {
  return {
    os: "linux",
    arch: "x64",
    cpu: { model: "Test CPU", logical: 16, physical: 8, flags: ["avx2"] },
    ram: { total_bytes: ramGiB * GIB, available_bytes: ramGiB * GIB * 0.9 },
    gpus: gpus.map((g, i) => ({ ...testGpu(i), ...g })),
    probes: [],
    ...over,
  };
}

const CPU_ONLY = hw(32);
const GPU_8 = hw(32, [{ total_bytes: 8 * GIB, free_bytes: 7.5 * GIB }]);
const GPU_24 = hw(64, [{ total_bytes: 24 * GIB, free_bytes: 23 * GIB, name: "RTX 4090" }]);
const APPLE_16: HardwareSnapshot = {
  ...hw(16, [
    {
      vendor: "apple",
      backend: "metal",
      name: "Apple M2 GPU",
      total_bytes: (16 * GIB * 2) / 3,
      free_bytes: (16 * GIB * 2) / 3,
      unified: true,
      driver: "Metal",
    },
  ]),
  os: "darwin",
  arch: "arm64",
};

const config = (raw: Record<string, unknown> = {}) => ConfigSchema.parse(raw);

const models = new Map<string, ModelInfo>();
async function model(name: string, spec: () => Parameters<typeof writeGguf>[2]): Promise<ModelInfo> {
  if (!models.has(name)) {
    using dir = tmpdir();
    models.set(name, modelInfo(await readGgufHeader(writeGguf(dir.path, `${name}.gguf`, spec()))));
  }
  return models.get(name)!;
}

describe("planner on fake machines", () => {
  test("CPU only: no offload, threads per physical core, argv complete", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, CPU_ONLY, config());
    expect(p.gpu_layers).toBe(0);
    expect(p.threads).toBe(8);
    expect(p.slots).toBe(1);
    expect(p.context_per_slot).toBe(4096);
    expect(p.argv.slice(0, 2)).toEqual(["-m", m.path]);
    expect(p.argv).toContain("--jinja");
    expect(p.argv.join(" ")).toContain("-np 1 -c 4096 -ngl 0 -t 8");
    expect(p.argv).not.toContain("--host");
    expect(p.devices.map((d) => d.id)).toEqual(["cpu"]);
    for (const d of p.decisions) expect(d.reason.length).toBeGreaterThan(5);
  });

  test("8 GB GPU: a 7B Q4 fits whole at a useful context", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, GPU_8, config());
    expect(p.gpu_layers_all).toBe(true);
    expect(p.gpu_layers).toBe(33);
    expect(p.context_per_slot).toBeGreaterThanOrEqual(4096);
    const gpu = p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu.usage.total).toBeLessThanOrEqual(gpu.budget_bytes);
  });

  test("8 GB GPU, after a start that ran out of its memory: more of it kept free, and the plan says why", async () => {
    const m = await model("l7", llama7b);
    const first = makePlan(m, GPU_8, config());
    const after = makePlan(m, GPU_8, { ...config(), gpu_out_of_memory: 2 });
    const gpu = (p: typeof first) => p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu(after).margin_bytes).toBe(gpu(first).margin_bytes + 2 * Math.floor(0.8 * GIB));
    expect(gpu(after).usage.total).toBeLessThan(gpu(first).usage.total);
    expect(after.gpu_layers * 1e6 + after.context_per_slot).toBeLessThan(
      first.gpu_layers * 1e6 + first.context_per_slot,
    );
    expect(after.warnings.join("\n")).toContain(
      "ran out of memory starting this model with layers on the GPU (2 times)",
    );
    expect(first.warnings.join("\n")).not.toContain("ran out of memory");
  });

  test("8 GB GPU: an 8x7B MoE is split, most of it on the CPU, context kept modest", async () => {
    const m = await model("moe", mixtral8x7b);
    const p = makePlan(m, GPU_8, config());
    expect(p.gpu_layers).toBeGreaterThan(0);
    expect(p.gpu_layers).toBeLessThan(m.n_layer);
    expect(p.context_per_slot).toBeLessThanOrEqual(8192);
    const gpu = p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu.usage.total).toBeLessThanOrEqual(gpu.budget_bytes);
    expect(p.decisions.find((d) => d.name === "gpu_layers")!.reason).toContain("of 32 layers");
  });

  test("24 GB GPU: an 8B fits whole, auto context stops at the trained context", async () => {
    const m = await model("l8", llama8b);
    const p = makePlan(m, GPU_24, config());
    expect(p.gpu_layers_all).toBe(true);
    expect(p.context_per_slot).toBe(8192);
  });

  test("auto context is not greedy: gemma3 (128k trained) gets at most the ladder's top", async () => {
    const m = await model("g3", gemma3);
    const p = makePlan(m, GPU_24, config());
    expect(p.context_per_slot).toBeLessThanOrEqual(32768);
    expect(p.context_per_slot).toBeGreaterThanOrEqual(8192);
    // And it leaves room: KV + compute no more than half of what the weights leave.
    const gpu = p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu.usage.kv_cache + gpu.usage.compute).toBeLessThanOrEqual(
      0.75 * (gpu.budget_bytes - gpu.usage.weights),
    );
  });

  test("Apple 16 GB: unified memory counts against RAM too", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, APPLE_16, config());
    expect(p.gpu_layers_all).toBe(true);
    const cpu = p.devices.find((d) => d.id === "cpu")!;
    const gpu = p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu.unified).toBe(true);
    expect(cpu.free_after_bytes).toBe(cpu.budget_bytes - cpu.usage.total - gpu.usage.total);
  });

  // docs/plan.md, "Budgets": nvidia-smi reports no memory for a GB10 (DGX Spark); its GPU uses
  // the system's, so it is planned as Apple Silicon is, not skipped for a CPU-only launch.
  test("a GB10 (no memory of its own reported): the model whole on its GPU, counted against RAM", async () => {
    const m = await model("l7", llama7b);
    const ram = { total_bytes: 128 * GIB, available_bytes: 120 * GIB };
    const gpus = parseNvidiaSmi("0, NVIDIA GB10, [N/A], [N/A], 580.95.05, 12.1", ram)!;
    const p = makePlan(m, { ...hw(128), ram, gpus }, config());
    expect(p.gpu_layers_all).toBe(true);
    expect(p.argv.join(" ")).toContain(`-ngl ${m.n_layer + 1}`);
    const cpu = p.devices.find((d) => d.id === "cpu")!;
    const gpu = p.devices.find((d) => d.id === "gpu0")!;
    expect(gpu).toMatchObject({ unified: true, name: "NVIDIA GB10" });
    expect(gpu.budget_bytes).toBeLessThanOrEqual(cpu.budget_bytes);
    expect(cpu.free_after_bytes).toBe(cpu.budget_bytes - cpu.usage.total - gpu.usage.total);
  });

  // docs/plan.md, "Which GPUs": the snapshots as probeHardware makes them from llama-server's
  // --list-devices (test/plan/probe.test.ts).
  test("a Vulkan build's AMD card no vendor tool saw: the model on it", async () => {
    const m = await model("l7", llama7b);
    const listed = reconcileGpus(
      [],
      [
        {
          name: "Vulkan0",
          description: "AMD Radeon RX 7800 XT",
          total_bytes: 16 * GIB,
          free_bytes: 15 * GIB,
        },
      ],
      hw(32).ram,
      "llama-server",
    );
    const p = makePlan(m, hw(32, [], { gpus: listed.gpus }), config());
    expect(p.gpu_layers_all).toBe(true);
    expect(p.devices.find((d) => d.id === "gpu0")).toMatchObject({
      name: "AMD Radeon RX 7800 XT",
      unified: false,
    });
  });

  test("a CPU build beside an NVIDIA GPU: a CPU plan that says which GPU goes unused", async () => {
    const m = await model("l7", llama7b);
    const listed = reconcileGpus(hw(32, [{ name: "RTX 4090" }]).gpus, [], hw(32).ram, "/opt/llama-server");
    const p = makePlan(m, hw(32, [], { gpus: listed.gpus, gpus_unused: listed.unused }), config());
    expect(p.argv.join(" ")).toContain("-ngl 0");
    expect(p.warnings).toContainEqual(expect.stringContaining("RTX 4090 is not used"));
    expect(p.decisions.find((d) => d.name === "gpu_layers")?.reason).toStartWith(
      "no GPU this llama-server can use",
    );
    // Layers asked for: the error names the reason, as the warning does.
    const asked = coreErrorOf(() =>
      makePlan(
        m,
        hw(32, [], { gpus: listed.gpus, gpus_unused: listed.unused }),
        config({ model: { gpu_layers: 99 } }),
      ),
    );
    expect(asked.message).toContain("RTX 4090 is not used");
  });

  test("a second discrete card no tool vouches for beside a vouched one: --device names the planned GPU only", async () => {
    const m = await model("l7", llama7b);
    const nvidia = hw(32, [
      { name: "NVIDIA GeForce RTX 4090", vendor: "nvidia", total_bytes: 24 * GIB, free_bytes: 23 * GIB },
    ]);
    const listed = reconcileGpus(
      nvidia.gpus,
      [
        {
          name: "Vulkan0",
          description: "AMD Radeon RX 7800 XT",
          total_bytes: 16 * GIB,
          free_bytes: 15 * GIB,
        },
        {
          name: "Vulkan1",
          description: "NVIDIA GeForce RTX 4090",
          total_bytes: 24 * GIB,
          free_bytes: 23 * GIB,
        },
      ],
      hw(32).ram,
      "llama-server",
    );
    expect(listed.left).toEqual(["Vulkan0"]);
    const snapshot = hw(32, [], { gpus: listed.gpus, devices_left_out: listed.left });
    const p = makePlan(m, snapshot, config());
    expect(p.argv.join(" ")).toContain("--device Vulkan1");
    expect(p.decisions.find((d) => d.name === "devices")?.reason).toContain("Vulkan0");
    // On the CPU, or with nothing left out, llama-server's own choice stands.
    expect(makePlan(m, snapshot, config({ model: { gpu_layers: 0 } })).argv).not.toContain("--device");
    expect(makePlan(m, hw(32, [], { gpus: listed.gpus }), config()).argv).not.toContain("--device");
  });

  test("deepseek2 (MLA, MoE) plans on CPU", async () => {
    const m = await model("ds", deepseek2);
    const p = makePlan(m, CPU_ONLY, config());
    expect(p.context_per_slot).toBeGreaterThanOrEqual(2048);
  });
});

describe("config overrides and errors", () => {
  test("explicit context and slots: -c is per-slot × slots", async () => {
    const m = await model("l8", llama8b);
    const p = makePlan(m, GPU_24, config({ model: { context: 4096 }, llama: { parallel: 3 } }));
    expect(p.context_per_slot).toBe(4096);
    expect(p.slots).toBe(3);
    const i = p.argv.indexOf("-c");
    expect(p.argv[i + 1]).toBe("12288");
    expect(p.argv[p.argv.indexOf("-np") + 1]).toBe("3");
    expect(p.decisions.find((d) => d.name === "context")!.source).toBe("config");
  });

  test("a context above the trained one is capped with a warning", async () => {
    const m = await model("l8", llama8b);
    const p = makePlan(m, GPU_24, config({ model: { context: 100000 } }));
    expect(p.context_per_slot).toBe(8192);
    expect(p.warnings.join(" ")).toContain("capped");
  });

  test("an explicit context that cannot fit is model_plan_error, not silently lowered", async () => {
    const m = await model("l8", llama8b);
    const small = hw(8);
    const e = coreErrorOf(() =>
      makePlan(m, small, config({ model: { context: 8192 }, llama: { parallel: 8 } })),
    );
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toContain("model.context 8192");
    expect(e.message).toMatch(/needs [\d.]+ [GM]iB but has [\d.]+ [GM]iB/);
  });

  test("explicit gpu_layers that do not fit the GPU are an error", async () => {
    const m = await model("moe", mixtral8x7b);
    const e = coreErrorOf(() => makePlan(m, GPU_8, config({ model: { gpu_layers: 33 } })));
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toContain("gpu0");
  });

  test("gpu_layers on a machine with no GPU is an error; vram_bytes 0 disables the GPU", async () => {
    const m = await model("l7", llama7b);
    expect(coreErrorOf(() => makePlan(m, CPU_ONLY, config({ model: { gpu_layers: 10 } }))).code).toBe(
      "model_plan_error",
    );
    const p = makePlan(m, GPU_24, config({ hardware: { vram_bytes: 0 } }));
    expect(p.gpu_layers).toBe(0);
  });

  test("a model too big for the machine even at the smallest context names needed vs available", async () => {
    const m = await model("moe", mixtral8x7b);
    const e = coreErrorOf(() => makePlan(m, hw(16), config()));
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toContain("smallest useful context");
    expect(e.data?.needed_bytes as number).toBeGreaterThan(e.data?.available_bytes as number);
  });

  test("ram_bytes override is the budget as given", async () => {
    const m = await model("l7", llama7b);
    expect(coreErrorOf(() => makePlan(m, hw(64), config({ hardware: { ram_bytes: 2 * GIB } }))).code).toBe(
      "model_plan_error",
    );
    const p = makePlan(m, hw(4), config({ hardware: { ram_bytes: 16 * GIB } }));
    expect(p.devices[0]!.budget_bytes).toBe(16 * GIB);
  });

  test("quantized V cache forces flash attention; with flash_attn off it is a config error", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, CPU_ONLY, config({ llama: { cache_type_k: "q8_0", cache_type_v: "q8_0" } }));
    expect(p.argv.join(" ")).toContain("-fa on --cache-type-k q8_0 --cache-type-v q8_0");
    const e = coreErrorOf(() =>
      makePlan(m, CPU_ONLY, config({ llama: { cache_type_v: "q8_0", flash_attn: "off" } })),
    );
    expect(e.code).toBe("config_invalid");
  });

  test("mmap, mlock, threads and extra_args come from the config, extra args last", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(
      m,
      CPU_ONLY,
      config({ llama: { mmap: false, mlock: true, threads: 3, extra_args: ["--temp", "0.2"] } }),
    );
    expect(p.argv).toContain("--no-mmap");
    expect(p.argv).toContain("--mlock");
    expect(p.argv[p.argv.indexOf("-t") + 1]).toBe("3");
    expect(p.argv.slice(-2)).toEqual(["--temp", "0.2"]);
    expect(p.warnings.filter((w) => w.includes("extra_args"))).toEqual([]);
  });

  test("extra_args naming another model or projector file are warned of: the plan sized the configured one", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(
      m,
      CPU_ONLY,
      config({ llama: { extra_args: ["-m", "/other/big.gguf", "--mmproj", "/other/p.gguf"] } }),
    );
    // llama-server takes the last -m: the file the plan read is not the one that runs.
    expect(p.argv.slice(-4)).toEqual(["-m", "/other/big.gguf", "--mmproj", "/other/p.gguf"]);
    expect(p.warnings).toEqual(
      expect.arrayContaining([
        expect.stringContaining("llama.extra_args -m: llama-server loads that file, not model.path's"),
        expect.stringContaining(
          "llama.extra_args --mmproj: llama-server loads that file, not model.mmproj's",
        ),
      ]),
    );
  });

  test("extra_args downloading another model or projector (-hf, --model-url, -mmu) are warned of, no URL quoted", async () => {
    const m = await model("l7", llama7b);
    const url = "https://user:s3cret@example.com/big.gguf";
    const p = makePlan(
      m,
      CPU_ONLY,
      config({
        llama: {
          extra_args: ["-hf", "org/other-GGUF", "--model-url", url, "-mmu", "https://example.com/p.gguf"],
        },
      }),
    );
    // Each makes llama-server fetch and load a file the plan never read.
    expect(p.warnings).toEqual(
      expect.arrayContaining([
        expect.stringContaining("llama.extra_args -hf: llama-server loads"),
        expect.stringContaining("llama.extra_args --model-url: llama-server loads"),
        expect.stringContaining("llama.extra_args -mmu: llama-server loads"),
      ]),
    );
    expect(p.warnings.join("\n")).not.toContain("s3cret");
  });

  test("extra_args pulling another model from Docker Hub (-dr, --docker-repo) are warned of", async () => {
    const m = await model("l7", llama7b);
    for (const extra of [["-dr", "gemma3"], ["--docker-repo=ai/gemma3:latest"]]) {
      const p = makePlan(m, CPU_ONLY, config({ llama: { extra_args: extra } }));
      // llama-server fetches that model and loads it in place of the one the plan read (help.txt).
      const flag = (extra[0] as string).split("=")[0];
      expect(p.warnings).toContainEqual(
        expect.stringContaining(`llama.extra_args ${flag}: llama-server loads`),
      );
    }
  });

  test("extra_args that make llama-server keep the conversation are warned of (plan/decide/log-privacy.ts)", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(
      m,
      CPU_ONLY,
      config({ llama: { extra_args: ["-lv", "5", "--log-file", "/tmp/l.log"] } }),
    );
    expect(p.argv.slice(-4)).toEqual(["-lv", "5", "--log-file", "/tmp/l.log"]);
    expect(p.warnings).toEqual(
      expect.arrayContaining([
        expect.stringContaining("llama.extra_args -lv: llama-server logs prompts and replies"),
        expect.stringContaining(
          "llama.extra_args --log-file: llama-server writes what it logs to /tmp/l.log",
        ),
      ]),
    );
  });
});

describe("prompt reuse in the plan (docs/agent.md#prompt-reuse)", () => {
  test("--cache-ram is always set, counted as its own line of the CPU's memory and in its total", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, CPU_ONLY, config({ app: { data_dir: "/d" } }));
    const cpu = p.devices.find((d) => d.id === "cpu")!;
    const mib = Number(p.argv[p.argv.indexOf("--cache-ram") + 1]);
    expect(mib).toBeGreaterThan(0);
    expect(mib).toBeLessThanOrEqual(8192);
    expect(cpu.usage.cache_ram).toBe(mib * 2 ** 20);
    const parts = cpu.usage.weights + cpu.usage.kv_cache + cpu.usage.compute + cpu.usage.output;
    expect(cpu.usage.total).toBe(parts + cpu.usage.cache_ram);
    expect(cpu.free_after_bytes).toBeGreaterThan(0);
    // Four conversations' worth of the KV cache, well inside what is left.
    expect(cpu.usage.cache_ram).toBeGreaterThanOrEqual(4 * cpu.usage.kv_cache);
    expect(p.decisions.find((d) => d.name === "cache_ram")).toMatchObject({ value: mib, source: "auto" });
  });

  test("a GPU's memory holds no prompt cache: it is host RAM", async () => {
    const m = await model("l7", llama7b);
    const p = makePlan(m, GPU_8, config());
    expect(p.devices.find((d) => d.id === "gpu0")!.usage.cache_ram).toBe(0);
    expect(p.devices.find((d) => d.id === "cpu")!.usage.cache_ram).toBeGreaterThan(0);
  });

  test("the slot files' folder is data_dir/kv, with llama.kv_disk_bytes 0 too (a slot's erase needs it, 93e)", async () => {
    const m = await model("l7", llama7b);
    const on = makePlan(m, CPU_ONLY, config({ app: { data_dir: "/d" } }));
    expect(on.argv.join(" ")).toContain("--slot-save-path /d/kv");
    const off = makePlan(m, CPU_ONLY, config({ app: { data_dir: "/d" }, llama: { kv_disk_bytes: 0 } }));
    expect(off.argv.join(" ")).toContain("--slot-save-path /d/kv");
    expect(off.decisions.find((d) => d.name === "slot_save")).toMatchObject({
      value: "/d/kv",
      reason: expect.stringContaining("a deleted session's slot can be emptied"),
    });
    // extra_args still win: they come after.
    const mine = makePlan(m, CPU_ONLY, config({ llama: { extra_args: ["--cache-ram", "64"] } }));
    expect(mine.argv.slice(-2)).toEqual(["--cache-ram", "64"]);
  });
});

// transcripts/73c-ctx-bigger-than-train: llama-server caps -c at the trained context.
describe("tiny-llama.gguf's shape", () => {
  test("a context above its trained 2048 is capped like llama-server does", async () => {
    using dir = tmpdir();
    const m = modelInfo(await readGgufHeader(writeGguf(dir.path, "tiny-llama.gguf", tinyLlama())));
    const p = makePlan(m, CPU_ONLY, config({ model: { context: 4096 } }));
    expect(p.context_per_slot).toBe(2048);
    const auto = makePlan(m, CPU_ONLY, config());
    expect(auto.context_per_slot).toBe(2048);
  });
});
