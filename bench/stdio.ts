#!/usr/bin/env bun
/**
 * Foundation benchmarks: the compiled core against `cat` (the pipe's own limit) in the same run.
 *   cold start      spawn → initialize result, median of 20
 *   throughput      100k pipelined pings, median of 5 runs
 *   latency         one ping at a time, p50/p99 over 2000 round trips
 *   idle RSS        after initialize
 * Usage: bun bench/stdio.ts [--json]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../test/fixtures/core-process.ts";

const BIN = ensureBinary();
const CORE = [BIN, "serve-stdio", "--config", "/nonexistent/config.yaml"];
const CAT = ["cat"];
const enc = new TextEncoder();

function spawn(cmd: string[]) {
  return Bun.spawn(cmd, {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "ignore",
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: "silent" },
  });
}

/** Reads lines from a stream, resolving `next()` with each. */
function lineReader(stream: ReadableStream<Uint8Array>) {
  const reader = stream.getReader();
  const dec = new TextDecoder();
  let buf = "";
  return {
    async next(): Promise<string> {
      for (;;) {
        const nl = buf.indexOf("\n");
        if (nl !== -1) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          return line;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("stream ended");
        buf += dec.decode(value, { stream: true });
      }
    },
    /** Counts newlines until `n` lines have arrived. */
    async countLines(n: number): Promise<void> {
      let seen = 0;
      for (let i = 0; i < buf.length; i++) if (buf.charCodeAt(i) === 10) seen++;
      buf = "";
      while (seen < n) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended after ${seen} lines`);
        for (let i = 0; i < value.length; i++) if (value[i] === 10) seen++;
      }
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

const INIT = JSON.stringify({ id: 1, method: "initialize", params: { protocol_versions: [1] } }) + "\n";

async function coldStart(cmd: string[], runs = 20): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const p = spawn(cmd);
    p.stdin.write(INIT);
    p.stdin.flush();
    await lineReader(p.stdout).next();
    times.push(performance.now() - t0);
    p.stdin.end();
    await p.exited;
  }
  return median(times);
}

async function throughput(cmd: string[], n = 100_000): Promise<number> {
  const p = spawn(cmd);
  const lines = lineReader(p.stdout);
  let payload = "";
  for (let i = 0; i < n; i++) payload += `{"id":${i},"method":"ping"}\n`;
  const bytes = enc.encode(payload);
  const t0 = performance.now();
  const writing = (async () => {
    const CHUNK = 64 * 1024;
    for (let o = 0; o < bytes.length; o += CHUNK) {
      p.stdin.write(bytes.subarray(o, o + CHUNK));
      await p.stdin.flush();
    }
  })();
  await lines.countLines(n);
  const secs = (performance.now() - t0) / 1000;
  await writing;
  p.stdin.end();
  await p.exited;
  return n / secs;
}

async function latency(cmd: string[], n = 2000): Promise<{ p50: number; p99: number }> {
  const p = spawn(cmd);
  const lines = lineReader(p.stdout);
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    p.stdin.write(`{"id":${i},"method":"ping"}\n`);
    p.stdin.flush();
    await lines.next();
    times.push(performance.now() - t0);
  }
  p.stdin.end();
  await p.exited;
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) };
}

async function idleRss(cmd: string[]): Promise<number> {
  const p = spawn(cmd);
  p.stdin.write(INIT);
  p.stdin.flush();
  await lineReader(p.stdout).next();
  await Bun.sleep(300);
  const status = readFileSync(`/proc/${p.pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  p.stdin.end();
  await p.exited;
  return kb / 1024;
}

const rows: { metric: string; core: number; baseline: number; unit: string; target: string }[] = [];
const cs = [await coldStart(CORE), await coldStart(CAT)];
rows.push({
  metric: "cold start (median of 20)",
  core: cs[0]!,
  baseline: cs[1]!,
  unit: "ms",
  target: "< 25 ms",
});
// The machine is shared and noisy: the median of 5 runs of 100k pings each.
async function medianThroughput(cmd: string[]): Promise<number> {
  const out: number[] = [];
  for (let i = 0; i < 5; i++) out.push(await throughput(cmd));
  return median(out);
}
const tp = [await medianThroughput(CORE), await medianThroughput(CAT)];
rows.push({
  metric: "pipelined pings (5 × 100k)",
  core: tp[0]!,
  baseline: tp[1]!,
  unit: "req/s",
  target: ">= 500k/s",
});
const lat = [await latency(CORE), await latency(CAT)];
rows.push({ metric: "round trip p50", core: lat[0]!.p50, baseline: lat[1]!.p50, unit: "ms", target: "" });
rows.push({
  metric: "round trip p99",
  core: lat[0]!.p99,
  baseline: lat[1]!.p99,
  unit: "ms",
  target: "< 2 ms",
});
if (process.platform === "linux") {
  const rss = [await idleRss(CORE), await idleRss(CAT)];
  rows.push({ metric: "idle RSS", core: rss[0]!, baseline: rss[1]!, unit: "MB", target: "< 40 MB" });
  // A host always has a config: loading it (YAML, the zod schemas) costs memory too.
  const withConfig = [BIN, "serve-stdio", "--config", join(import.meta.dir, "../config.example.yaml")];
  rows.push({
    metric: "idle RSS, config loaded",
    core: await idleRss(withConfig),
    baseline: rss[1]!,
    unit: "MB",
    target: "",
  });
}

if (process.argv.includes("--json")) {
  process.stdout.write(JSON.stringify(rows, null, 2) + "\n");
} else {
  const fmt = (v: number) => (v >= 1000 ? Math.round(v).toLocaleString("en-US") : v.toFixed(2));
  process.stdout.write(
    `${"metric".padEnd(28)}${"local-ai".padStart(14)}${"cat".padStart(14)}${"ratio".padStart(9)}  unit   target\n`,
  );
  for (const r of rows) {
    process.stdout.write(
      `${r.metric.padEnd(28)}${fmt(r.core).padStart(14)}${fmt(r.baseline).padStart(14)}${(r.core / r.baseline).toFixed(2).padStart(9)}  ${r.unit.padEnd(6)} ${r.target}\n`,
    );
  }
}
