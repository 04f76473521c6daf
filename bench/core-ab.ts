#!/usr/bin/env bun
/**
 * Two builds of the core, chat by chat (issue 31): which one adds more to the first token, and
 * where (the line sent → the request written; the first token read → the line back).
 *
 *   LOCAL_AI_BENCH_LLAMA_SERVER=/path/llama-server LOCAL_AI_BENCH_MODEL=/path/model.gguf \
 *   LOCAL_AI_BENCH_CORE_B=/path/older/local-ai ./node_modules/.bin/bun bench/core-ab.ts
 *
 * A is this checkout's compiled core (LOCAL_AI_BENCH_CORE_A names another), B another build. Each
 * core runs its own llama-server from the same config; both are loaded and warmed, then they
 * take turns, chat by chat, the first of each pair swapping every round, so both see the same
 * noise (a loaded box shifts both sides of a pair). Short replies (BENCH_MAX_TOKENS, default 16):
 * only the first token is measured. BENCH_AB_RUNS (default 30) pairs; BENCH_SETTLE_MS (10) as in
 * chat-overhead.ts. Printed: per build, the medians, and the paired B − A differences.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary } from "../test/fixtures/core-process.ts";
import { CoreProcess } from "./overhead/core.ts";
import { childPids } from "./overhead/cpu-time.ts";
import { settle } from "./overhead/settle.ts";
import { median, type StreamTiming, spread, ttft } from "./overhead/stream-timing.ts";

const RUNS = Number(process.env.BENCH_AB_RUNS ?? 30);
const MAX_TOKENS = Number(process.env.BENCH_MAX_TOKENS ?? 16);
const SETTLE = { quietMs: Number(process.env.BENCH_SETTLE_MS ?? 10), maxMs: 2000, slackNs: 2e6, stepMs: 2 };
const INPUT = "Tell me a long story about a lighthouse keeper.";

interface Side {
  label: string;
  proc: CoreProcess;
  runs: { first: number; before: number; after: number; promptMs: number }[];
}

function config(work: string, name: string, server: string, model: string): string {
  const file = join(work, `${name}.yaml`);
  writeFileSync(
    file,
    [
      `app: { data_dir: ${JSON.stringify(join(work, name))} }`,
      `llama: { binary: ${JSON.stringify(server)}, startup_timeout_s: 120 }`,
      `model: { path: ${JSON.stringify(model)}, max_tokens: ${MAX_TOKENS} }`,
      "memory: { enabled: false }",
      "agents: [{ name: assistant, system_prompt: You are terse., temperature: 0 }]",
    ].join("\n"),
  );
  return file;
}

async function open(
  label: string,
  binary: string,
  work: string,
  server: string,
  model: string,
): Promise<Side> {
  const proc = CoreProcess.spawn(binary, work, config(work, label, server, model));
  await proc.request("initialize", { protocol_versions: [1] });
  const up = await proc.request("warmup");
  if (up.terminal.type !== "result")
    throw new Error(`${label}: warmup failed: ${JSON.stringify(up.terminal)}`);
  // The JIT keeps compiling for tens of chats: unrecorded ones first.
  for (let i = 0; i < 10; i++) await proc.request("chat", { input: INPUT });
  return { label, proc, runs: [] };
}

async function chatOn(side: Side): Promise<void> {
  const chat = await side.proc.request("chat", { input: INPUT });
  const result = chat.terminal.result as { trace_id?: string } | undefined;
  if (!result?.trace_id) throw new Error(`${side.label}: chat failed: ${JSON.stringify(chat.terminal)}`);
  const step = await side.proc.stepOf(result.trace_id, chat as StreamTiming);
  side.runs.push({
    first: ttft(chat),
    before: step?.own?.before ?? Number.NaN,
    after: step?.own?.after ?? Number.NaN,
    promptMs: step?.promptMs ?? Number.NaN,
  });
}

function report(a: Side, b: Side): void {
  const col = (s: Side, k: keyof Side["runs"][number]) => s.runs.map((r) => r[k]);
  const diff = (k: keyof Side["runs"][number]) => a.runs.map((r, i) => (b.runs[i]?.[k] ?? Number.NaN) - r[k]);
  const beyond = (s: Side) => s.runs.map((r) => r.first - r.promptMs);
  for (const s of [a, b]) {
    console.log(
      `${s.label}: first token ${spread(col(s, "first"), 2)} ms, beyond the prompt ${spread(beyond(s), 2)}, ` +
        `the line sent → the request written ${spread(col(s, "before"), 2)}, ` +
        `the first token read → the line back ${spread(col(s, "after"), 2)}`,
    );
  }
  const beyondDiff = beyond(b).map((x, i) => x - (beyond(a)[i] ?? Number.NaN));
  console.log(
    `B − A, paired (median of ${a.runs.length}): first token ${median(diff("first")).toFixed(2)} ms, ` +
      `beyond the prompt ${median(beyondDiff).toFixed(2)}, to the request ${median(diff("before")).toFixed(2)}, ` +
      `back to the host ${median(diff("after")).toFixed(2)}`,
  );
}

async function main(): Promise<void> {
  const server = process.env.LOCAL_AI_BENCH_LLAMA_SERVER;
  const model = process.env.LOCAL_AI_BENCH_MODEL;
  const coreB = process.env.LOCAL_AI_BENCH_CORE_B;
  if (!server || !model || !coreB) {
    console.error("set LOCAL_AI_BENCH_LLAMA_SERVER, LOCAL_AI_BENCH_MODEL and LOCAL_AI_BENCH_CORE_B");
    process.exit(2);
  }
  const coreA = process.env.LOCAL_AI_BENCH_CORE_A ?? ensureBinary();
  const work = mkdtempSync(join(tmpdir(), "local-ai-core-ab-"));
  const a = await open("A", coreA, work, server, model);
  const b = await open("B", coreB, work, server, model);
  const pids = [a.proc.pid, b.proc.pid, ...childPids(a.proc.pid), ...childPids(b.proc.pid)];
  try {
    for (let i = 0; i < RUNS; i++) {
      for (const side of i % 2 === 0 ? [a, b] : [b, a]) {
        await settle(pids, SETTLE);
        await chatOn(side);
      }
    }
    console.log(
      `A: ${coreA}\nB: ${coreB}\n${RUNS} pairs, ${MAX_TOKENS}-token replies, the first of a pair swapping`,
    );
    report(a, b);
  } finally {
    await Promise.all(
      [a.proc.shutdown(), b.proc.shutdown()].map((p) => Promise.race([p, Bun.sleep(30_000)])),
    );
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
