#!/usr/bin/env bun
/**
 * What the x64 `-baseline` runtime costs (build.ts ships it: CPUs without AVX2 must start the
 * core). Compiles the core twice for this host, with Bun's default x64 runtime and with the
 * baseline one, then measures both in alternating rounds (one start of each in turn, and the
 * order flips each round, so drift in a shared machine's load hits both alike):
 *   cold start    spawn → initialize result, 5 per build per round
 *   throughput    50k pipelined pings, 1 run per build per round
 * Prints medians, the ratios baseline/default and control/default, and whether baseline is
 * within 10% of default; exits 1 if not.
 * Usage: bun bench/baseline.ts [--rounds N] [--json]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { compile } from "../scripts/compile.ts";

const LIMIT = 0.1;
const args = process.argv.slice(2);
const roundsArg = args.indexOf("--rounds");
const ROUNDS = roundsArg >= 0 ? Math.max(1, Number(args[roundsArg + 1]) || 1) : 20;

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

/** Bytes that differ between two files of the same size (-1 when the sizes differ). */
function differingBytes(a: string, b: string): number {
  const x = readFileSync(a);
  const y = readFileSync(b);
  if (x.length !== y.length) return -1;
  let n = 0;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) n++;
  return n;
}

type Name = "default" | "baseline" | "control";
const NAMES: Name[] = ["default", "baseline", "control"];

const dir = mkdtempSync(join(tmpdir(), "local-ai-baseline-bench-"));
try {
  // The control is the default target built a second time: how far two builds that should
  // measure the same apart do on this machine (an A/A comparison: the noise floor).
  // One file name in three folders: the name is embedded in the executable, and names of
  // different lengths would shift its bytes.
  const builds: Record<Name, { bun: string; bin: string }> = {
    default: { bun: `bun-${os}-x64`, bin: join(dir, "default", `local-ai${exe}`) },
    baseline: { bun: `bun-${os}-x64-baseline`, bin: join(dir, "baseline", `local-ai${exe}`) },
    control: { bun: `bun-${os}-x64`, bin: join(dir, "control", `local-ai${exe}`) },
  };
  for (const b of Object.values(builds)) {
    mkdirSync(dirname(b.bin), { recursive: true });
    await compile({ bun: b.bun }, b.bin);
  }

  const samples = Object.fromEntries(
    NAMES.map((n) => [n, { cold: [] as number[], pings: [] as number[] }]),
  ) as Record<Name, { cold: number[]; pings: number[] }>;
  // One unmeasured start each: the first spawn pays for the page cache.
  for (const b of Object.values(builds)) await coldStartMs(b.bin);
  for (let round = 0; round < ROUNDS; round++) {
    // Each build takes each place in the order in turn.
    const order = NAMES.map((_, i) => NAMES[(i + round) % NAMES.length]!);
    for (let i = 0; i < 5; i++) {
      for (const name of order) samples[name].cold.push(await coldStartMs(builds[name].bin));
    }
    for (const name of order) samples[name].pings.push(await pingsPerSecond(builds[name].bin));
  }

  const med = (name: Name) => ({ cold: median(samples[name].cold), pings: median(samples[name].pings) });
  const [d, b, c] = [med("default"), med("baseline"), med("control")];
  // Worse is a slower start (higher ms) or fewer pings per second.
  const rows = [
    {
      metric: "cold start (ms, median)",
      default: d.cold,
      baseline: b.cold,
      ratio: b.cold / d.cold,
      control: c.cold / d.cold,
      ok: b.cold / d.cold <= 1 + LIMIT,
    },
    {
      metric: "pipelined pings (/s, median)",
      default: d.pings,
      baseline: b.pings,
      ratio: b.pings / d.pings,
      control: c.pings / d.pings,
      ok: b.pings / d.pings >= 1 - LIMIT,
    },
  ];
  const bytes = {
    baseline: differingBytes(builds.default.bin, builds.baseline.bin),
    control: differingBytes(builds.default.bin, builds.control.bin),
  };
  if (args.includes("--json")) {
    console.log(JSON.stringify({ rounds: ROUNDS, differing_bytes: bytes, rows }, null, 2));
  } else {
    console.log(`${ROUNDS} rounds, ${builds.default.bun} vs ${builds.baseline.bun}, and vs itself (control)`);
    console.log(
      `executables differ by ${bytes.baseline} bytes (two builds of ${builds.default.bun}: ${bytes.control}; -1: sizes differ)`,
    );
    console.log(
      `${"metric".padEnd(30)}${"default".padStart(12)}${"baseline".padStart(12)}${"ratio".padStart(8)}${"control".padStart(9)}  within 10%`,
    );
    const fmt = (v: number) => (v >= 1000 ? Math.round(v).toLocaleString("en-US") : v.toFixed(2));
    for (const r of rows) {
      console.log(
        `${r.metric.padEnd(30)}${fmt(r.default).padStart(12)}${fmt(r.baseline).padStart(12)}${r.ratio.toFixed(3).padStart(8)}${r.control.toFixed(3).padStart(9)}  ${r.ok ? "yes" : "NO"}`,
      );
    }
  }
  process.exitCode = rows.every((r) => r.ok) ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
