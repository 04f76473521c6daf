#!/usr/bin/env bun
/**
 * What the x64 `-baseline` runtime costs (build.ts ships it: CPUs without AVX2 must start the
 * core). Compiles the core twice for this host, with Bun's default x64 runtime and with the
 * baseline one, then measures both in alternating rounds (one start of each in turn, and the
 * order flips each round, so drift in a shared machine's load hits both alike):
 *   cold start    spawn → initialize result, 5 per build per round
 *   throughput    50k pipelined pings, 1 run per build per round
 * Prints medians, the ratio baseline/default, and whether each is within 10%; exits 1 if not.
 * Usage: bun bench/baseline.ts [--rounds N] [--json]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compile } from "../build.ts";

const LIMIT = 0.1;
const args = process.argv.slice(2);
const roundsArg = args.indexOf("--rounds");
const ROUNDS = roundsArg >= 0 ? Number(args[roundsArg + 1]) : 20;

if (process.arch !== "x64") {
  console.log(`no -baseline runtime for ${process.arch}: nothing to compare`);
  process.exit(0);
}
const os = process.platform === "win32" ? "windows" : process.platform;
const exe = os === "windows" ? ".exe" : "";

const INIT = `${JSON.stringify({ id: 1, method: "initialize", params: { protocol_versions: [1] } })}\n`;

function spawn(bin: string) {
  return Bun.spawn([bin, "serve-stdio", "--config", "/nonexistent/config.yaml"], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "ignore",
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: "silent" },
  });
}

/** Resolves once `n` newlines have arrived on the stream. */
async function readLines(stream: ReadableStream<Uint8Array>, n: number): Promise<void> {
  const reader = stream.getReader();
  let seen = 0;
  while (seen < n) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended after ${seen} of ${n} lines`);
    for (let i = 0; i < value.length; i++) if (value[i] === 10) seen++;
  }
  reader.releaseLock();
}

async function coldStartMs(bin: string): Promise<number> {
  const t0 = performance.now();
  const p = spawn(bin);
  p.stdin.write(INIT);
  p.stdin.flush();
  await readLines(p.stdout, 1);
  const ms = performance.now() - t0;
  p.stdin.end();
  await p.exited;
  return ms;
}

async function pingsPerSecond(bin: string, n = 50_000): Promise<number> {
  const p = spawn(bin);
  let payload = "";
  for (let i = 0; i < n; i++) payload += `{"id":${i},"method":"ping"}\n`;
  const bytes = new TextEncoder().encode(payload);
  const t0 = performance.now();
  const reading = readLines(p.stdout, n);
  for (let o = 0; o < bytes.length; o += 64 * 1024) {
    p.stdin.write(bytes.subarray(o, o + 64 * 1024));
    await p.stdin.flush();
  }
  await reading;
  const rate = n / ((performance.now() - t0) / 1000);
  p.stdin.end();
  await p.exited;
  return rate;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dir = mkdtempSync(join(tmpdir(), "local-ai-baseline-bench-"));
try {
  const builds = {
    default: { bun: `bun-${os}-x64`, bin: join(dir, `local-ai-default${exe}`) },
    baseline: { bun: `bun-${os}-x64-baseline`, bin: join(dir, `local-ai-baseline${exe}`) },
  };
  for (const b of Object.values(builds)) await compile({ bun: b.bun }, b.bin);

  const samples = {
    default: { cold: [] as number[], pings: [] as number[] },
    baseline: { cold: [] as number[], pings: [] as number[] },
  };
  // One unmeasured start each: the first spawn pays for the page cache.
  for (const b of Object.values(builds)) await coldStartMs(b.bin);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (["default", "baseline"] as const) : (["baseline", "default"] as const);
    for (let i = 0; i < 5; i++) {
      for (const name of order) samples[name].cold.push(await coldStartMs(builds[name].bin));
    }
    for (const name of order) samples[name].pings.push(await pingsPerSecond(builds[name].bin));
  }

  const cold = { default: median(samples.default.cold), baseline: median(samples.baseline.cold) };
  const pings = { default: median(samples.default.pings), baseline: median(samples.baseline.pings) };
  // Worse is slower start (higher ms) or fewer pings per second.
  const coldRatio = cold.baseline / cold.default;
  const pingRatio = pings.baseline / pings.default;
  const rows = [
    { metric: "cold start (ms, median)", ...cold, ratio: coldRatio, ok: coldRatio <= 1 + LIMIT },
    { metric: "pipelined pings (/s, median)", ...pings, ratio: pingRatio, ok: pingRatio >= 1 - LIMIT },
  ];
  if (args.includes("--json")) {
    console.log(JSON.stringify({ rounds: ROUNDS, rows }, null, 2));
  } else {
    console.log(`${ROUNDS} alternating rounds, ${builds.default.bun} vs ${builds.baseline.bun}`);
    console.log(
      `${"metric".padEnd(30)}${"default".padStart(12)}${"baseline".padStart(12)}${"ratio".padStart(8)}  within 10%`,
    );
    const fmt = (v: number) => (v >= 1000 ? Math.round(v).toLocaleString("en-US") : v.toFixed(2));
    for (const r of rows) {
      console.log(
        `${r.metric.padEnd(30)}${fmt(r.default).padStart(12)}${fmt(r.baseline).padStart(12)}${r.ratio.toFixed(3).padStart(8)}  ${r.ok ? "yes" : "NO"}`,
      );
    }
  }
  process.exitCode = rows.every((r) => r.ok) ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
