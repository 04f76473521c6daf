/**
 * The GPU memory check, part 1 of 3 (docs/plan.md "Checking the estimate on a GPU"): the launches
 * the plan makes for an 8B model (Llama-3.1-8B's shape, Q4_K, a full 128,256-token vocabulary)
 * on the NVIDIA cards of a table, each with what the plan expects it to hold. The card itself
 * need not be there: each launch then runs on whatever NVIDIA GPU the check has (device.sh), which
 * reports what it really took, and compare.ts puts the two side by side.
 *
 *   bun bench/gpu-memory/prepare.ts OUT_DIR
 *
 * OUT_DIR gets `8b.hdr` + `8b.size` (the model's header and full size: `truncate` makes the rest,
 * zeros, on the GPU machine), `test-model.gguf` (the tests' tiny llama, whole), `runs.tsv`
 * (name, then argv with `@MODELS@` for the folder the models are in) and `plans.json`.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { makePlan } from "../../src/plan/planner.ts";
import type { HardwareSnapshot } from "../../src/protocol/plan.ts";
import { encodeGguf, llama8b, writeGguf } from "../../test/fixtures/gguf-writer.ts";
import { cpuOnlyMachine, testGpu } from "../../test/fixtures/hardware.ts";
import { testTokenizer, writeLlamaTestModel } from "../../test/fixtures/llama-test-model.ts";

const MIB = 2 ** 20;

/** name, total and free MiB as nvidia-smi would report an idle card of the kind. */
const CARDS: Record<string, [string, number, number]> = {
  h200: ["NVIDIA H200", 143771, 143190],
  rtx4090: ["NVIDIA GeForce RTX 4090", 24564, 24000],
  rtx4070: ["NVIDIA GeForce RTX 4070", 12282, 11800],
  rtx4060: ["NVIDIA GeForce RTX 4060", 8188, 7800],
  rtx3060l: ["NVIDIA GeForce RTX 3060 Laptop GPU", 6144, 5900],
  gtx1650: ["NVIDIA GeForce GTX 1650", 4096, 3900],
};

interface Run {
  name: string;
  card: keyof typeof CARDS;
  model: "8b" | "test-model";
  llama?: Record<string, unknown>;
}

const RUNS: Run[] = [
  ...Object.keys(CARDS).map((card): Run => ({ name: card, card, model: "8b" })),
  { name: "rtx4060-fa-off", card: "rtx4060", model: "8b", llama: { flash_attn: "off" } },
  { name: "rtx4060-q8", card: "rtx4060", model: "8b", llama: { cache_type_k: "q8_0", cache_type_v: "q8_0" } },
  { name: "rtx4070-np4", card: "rtx4070", model: "8b", llama: { parallel: 4 } },
  { name: "h200-test-model", card: "h200", model: "test-model" },
];

/** The tests' 32 GiB machine with one card of the table, as the device list names it. */
function machine(card: keyof typeof CARDS): HardwareSnapshot {
  const [name, total, free] = CARDS[card]!;
  const gpu = { ...testGpu(0), name, total_bytes: total * MIB, free_bytes: free * MIB, device: "CUDA0" };
  return cpuOnlyMachine({ gpus: [gpu] });
}

/** Llama-3.1-8B's shape with a tokenizer llama-server loads: the tests' vocabulary, padded to 128,256. */
function model8b() {
  const { metadata } = testTokenizer();
  const array = <T>(key: string) => [...(metadata[key] as unknown as { value: T[] }).value];
  const tokens = array<string>("tokenizer.ggml.tokens");
  const types = array<number>("tokenizer.ggml.token_type");
  const scores = array<number>("tokenizer.ggml.scores");
  for (let i = tokens.length; i < 128256; i++) {
    tokens.push(`▁pad${i}`);
    types.push(1);
    scores.push(-1000 - i / 1e3);
  }
  return llama8b({
    ctx: 131072,
    extra: {
      ...metadata,
      "tokenizer.ggml.tokens": { type: "arr_str", value: tokens },
      "tokenizer.ggml.token_type": { type: "arr_i32", value: types },
      "tokenizer.ggml.scores": { type: "arr_f32", value: scores },
      "general.name": "local-ai gpu check 8B shape",
      "llama.rope.dimension_count": 128,
      "llama.vocab_size": 128256,
    },
  });
}

const out = process.argv[2];
if (!out) throw new Error("usage: bun bench/gpu-memory/prepare.ts OUT_DIR");
mkdirSync(out, { recursive: true });
const spec = model8b();
const { header, totalBytes } = encodeGguf(spec);
writeFileSync(join(out, "8b.hdr"), header);
writeFileSync(join(out, "8b.size"), String(totalBytes));
// A sparse copy to plan from (no disk), removed after.
const sparse = writeGguf(out, "8b-sparse.gguf", spec);
const files = { "8b": sparse, "test-model": writeLlamaTestModel(out, "test-model.gguf") };
const models = {
  "8b": modelInfo(await readGgufHeader(files["8b"])),
  "test-model": modelInfo(await readGgufHeader(files["test-model"])),
};
const plans: Record<string, unknown> = {};
const tsv: string[] = [];
for (const run of RUNS) {
  const config = ConfigSchema.parse({
    app: { data_dir: "@DATA@" },
    model: { path: files[run.model] },
    llama: { idle_sleep_s: 0, ...run.llama },
  });
  const plan = makePlan(models[run.model], machine(run.card), config);
  const argv = plan.argv.map((a) => (a === files[run.model] ? `@MODELS@/${run.model}.gguf` : a));
  // The saved slots need a folder there; the check has no use for them.
  const kept = argv.filter((a, i) => a !== "--slot-save-path" && argv[i - 1] !== "--slot-save-path");
  tsv.push(`${run.name}\t${kept.join(" ")}`);
  plans[run.name] = { card: CARDS[run.card], argv: kept, devices: plan.devices, warnings: plan.warnings };
}
writeFileSync(join(out, "runs.tsv"), `${tsv.join("\n")}\n`);
writeFileSync(join(out, "plans.json"), JSON.stringify(plans, null, 2));
rmSync(sparse);
console.log(tsv.join("\n"));
