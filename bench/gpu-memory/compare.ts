/**
 * The GPU memory check, part 3 of 3 (docs/plan.md "Checking the estimate on a GPU"): each launch's
 * planned GPU bytes beside what llama-server's log says it allocated there and what the GPU's
 * memory.used rose by (its peak over the baseline: the buffers plus the CUDA context, cuBLAS and
 * anything else the log does not name), and whether that would have fitted the card the launch
 * was planned for (its free memory as the plan read it).
 *
 *   bun bench/gpu-memory/compare.ts PREPARED_DIR OUT_DIR
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { buffersOf, gpuBuffers } from "./buffers.ts";

const MIB = 2 ** 20;
const [prepared, out] = process.argv.slice(2);
if (!prepared || !out) throw new Error("usage: bun bench/gpu-memory/compare.ts PREPARED_DIR OUT_DIR");
const plans = JSON.parse(readFileSync(join(prepared, "plans.json"), "utf8")) as Record<
  string,
  { card: [string, number, number]; devices: DevicePlan[] }
>;
const summary = readFileSync(join(out, "summary.txt"), "utf8");
const mib = (b: number) => (b / MIB).toFixed(0).padStart(6);

console.log(summary.split("\nRUN ")[0]);
console.log(
  "launch            |  planned GPU MiB: weights     kv compute  total | log CUDA0: model     kv compute | used: peak-base  unplanned | card free  fits",
);
for (const [name, p] of Object.entries(plans)) {
  const gpu = p.devices.find((d) => d.kind === "gpu")?.usage;
  const run = new RegExp(
    `^RUN ${name} ok=(\\d) load_s=\\S+ base=(\\d+) after_load=\\d+ after_reply=\\d+ peak=(\\d+)`,
    "m",
  ).exec(summary);
  const logPath = join(out, `${name}.log`);
  const log = existsSync(logPath) ? gpuBuffers(buffersOf(readFileSync(logPath, "utf8")), "CUDA0") : null;
  if (!gpu || !run) {
    console.log(`${name.padEnd(17)} | ${gpu ? "" : "no GPU planned "}${run ? "" : "not run"}`);
    continue;
  }
  const rose = (Number(run[3]) - Number(run[2])) * MIB;
  const free = p.card[2] * MIB;
  console.log(
    [
      name.padEnd(17),
      `${" ".repeat(16)}${mib(gpu.weights)} ${mib(gpu.kv_cache)} ${mib(gpu.compute)} ${mib(gpu.total)}`,
      log ? `${" ".repeat(10)}${mib(log.model)} ${mib(log.kv)} ${mib(log.compute)}` : "  (no log)".padEnd(31),
      `${" ".repeat(5)}${mib(rose)} ${mib(rose - gpu.total).padStart(10)}`,
      `${mib(free).padStart(9)}  ${run[1] === "1" ? (rose <= free ? "yes" : "NO") : "failed"}`,
    ].join(" |"),
  );
}
