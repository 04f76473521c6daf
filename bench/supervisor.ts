// Supervisor overhead: spawn→ready through the supervisor vs the stand-in's own start, and
// what one /health poll costs. Run: ./node_modules/.bin/bun bench/supervisor.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pickFreePort } from "../src/runtime/ports.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../test/fixtures/llama-stand-in/binary.ts";
import { makeSupervisor } from "../test/runtime/helpers/harness.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const LOAD_MS = "20";
const dir = mkdtempSync(join(tmpdir(), "bench-supervisor-"));
const stats = (xs: number[], digits = 1) => {
  const s = [...xs].sort((a, b) => a - b);
  const pick = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
  const f = (x: number) => x.toFixed(digits);
  return `median ${f(pick(0.5))} ms, p99 ${f(pick(0.99))} ms, min ${f(s[0] as number)} ms, max ${f(s.at(-1) as number)} ms`;
};

try {
  // 1. The stand-in's own start: spawn, poll /health every 5 ms until 200.
  const binary = writeFakeLlamaServer(dir);
  const model = writeFakeModel(dir);
  const raw: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const port = await pickFreePort();
    const t0 = performance.now();
    const child = Bun.spawn([binary, "-m", model, "--port", String(port)], {
      env: { ...process.env, FAKE_LLAMA_LOAD_MS: LOAD_MS },
      stderr: "ignore",
    });
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      await Bun.sleep(5);
    }
    raw.push(performance.now() - t0);
    child.kill();
    await child.exited;
  }

  // 2. The same through the supervisor (key check, pid record, logs, 100 ms health interval).
  const supervised: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const { supervisor } = makeSupervisor(dir, { env: { FAKE_LLAMA_LOAD_MS: LOAD_MS } });
    const t0 = performance.now();
    const lease = await supervisor.acquire(new AbortController().signal);
    supervised.push(performance.now() - t0);
    lease.release();
    await supervisor.stop();
  }

  // 3. One GET /health against a ready server, keep-alive, sequential.
  const { supervisor } = makeSupervisor(dir, { env: { FAKE_LLAMA_LOAD_MS: LOAD_MS } });
  const lease = await supervisor.acquire(new AbortController().signal);
  const polls: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    await (await fetch(`${lease.baseUrl}/health`)).arrayBuffer();
    polls.push(performance.now() - t0);
  }
  lease.release();
  await supervisor.stop();

  const m = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  process.stdout.write(
    `stand-in alone, spawn→/health 200 (${RUNS} runs, load ${LOAD_MS} ms): ${stats(raw)}\n`,
  );
  process.stdout.write(
    `through the supervisor, acquire→lease (${RUNS} runs):         ${stats(supervised)}\n`,
  );
  process.stdout.write(
    `supervisor overhead (median difference):                     ${(m(supervised) - m(raw)).toFixed(1)} ms\n`,
  );
  process.stdout.write(`one GET /health on a ready server (200 polls):               ${stats(polls, 3)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
