/**
 * Planning a 40 GB model must take < 200 ms and < 50 MB of extra memory: the GGUF reader
 * touches the header only. Writes a sparse 40 GB file (70B-class shape, 128k-token vocabulary
 * header), then times read → estimate → plan in a fresh process state.
 *
 *   bun bench/plan.ts
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../src/config/schema.ts";
import { readGgufHeader } from "../src/plan/gguf-read.ts";
import { modelInfo } from "../src/plan/model.ts";
import { makePlan } from "../src/plan/planner.ts";
import { sparse40g, writeGguf } from "../test/fixtures/gguf-writer.ts";

const GIB = 2 ** 30;
const dir = mkdtempSync(join(tmpdir(), "local-ai-bench-"));
try {
  const path = writeGguf(dir, "big.gguf", sparse40g());
  const size = statSync(path).size;
  const hw = {
    os: "linux",
    arch: "x64",
    cpu: { model: "bench", logical: 16, physical: 8, flags: [] },
    ram: { total_bytes: 64 * GIB, available_bytes: 60 * GIB },
    gpus: [],
    probes: [],
  };
  const config = ConfigSchema.parse({});
  const runs: { ms: number; rssMB: number; heapMB: number }[] = [];
  for (let i = 0; i < 6; i++) {
    Bun.gc(true);
    const rss0 = process.memoryUsage().rss;
    const heap0 = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    const model = modelInfo(await readGgufHeader(path));
    const plan = makePlan(model, hw, config);
    const ms = performance.now() - t0;
    const mem = process.memoryUsage();
    runs.push({ ms, rssMB: (mem.rss - rss0) / 1e6, heapMB: (mem.heapUsed - heap0) / 1e6 });
    if (i === 0) {
      console.log(
        `model: ${(size / 1e9).toFixed(1)} GB on disk (sparse), ${model.n_layer} layers, ${(model.weights_bytes / 1e9).toFixed(1)} GB weights, ` +
          `vocab ${model.n_vocab}; plan: ${plan.context_per_slot} ctx, -ngl ${plan.gpu_layers}`,
      );
    }
  }
  for (const [i, r] of runs.entries()) {
    console.log(
      `run ${i}${i === 0 ? " (cold)" : ""}: ${r.ms.toFixed(1)} ms, +${r.rssMB.toFixed(1)} MB rss, +${r.heapMB.toFixed(1)} MB heap`,
    );
  }
  const worst = Math.max(...runs.map((r) => r.ms));
  const worstRss = Math.max(...runs.map((r) => r.rssMB));
  console.log(`worst: ${worst.toFixed(1)} ms (limit 200), +${worstRss.toFixed(1)} MB rss (limit 50)`);
  console.log(worst < 200 && worstRss < 50 ? "PASS" : "FAIL");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
