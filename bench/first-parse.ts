#!/usr/bin/env bun
/**
 * A schema's first parse in a fresh process, with zod's compiled fast path and without it
 * (`jitless`), the two taking turns: what a parse made once per process or per load costs on its
 * first call (docs/performance.md, "A cold chat's way to the spawn, again"). The /props body is
 * the recording's (test/fixtures/llama-server/transcripts/04), a chat's params a plain chat's, the
 * config the example's. The second parse is each process's next, compiled by then where it compiles.
 *
 *   ./node_modules/.bin/bun bench/first-parse.ts        (BENCH_RUNS, default 12, per side)
 */
import { join } from "node:path";

const RUNS = Number(process.env.BENCH_RUNS ?? 12);
const root = join(import.meta.dir, "..");

/** Each case: the module to import, and the expression that parses once (`jitless` in scope). */
const CASES = {
  props: {
    setup: `const t = require("node:fs").readFileSync(${JSON.stringify(join(root, "test/fixtures/llama-server/transcripts/04-props.txt"))}, "utf8");
const body = JSON.parse(t.slice(t.indexOf("\\n{") + 1, t.lastIndexOf("}") + 1));
const { PropsSchema: schema } = await import(${JSON.stringify(join(root, "src/llama/props.ts"))});`,
  },
  chat: {
    setup: `const body = { input: "Tell me a very long story about a lighthouse keeper.", session_id: "abc" };
const { ChatParamsSchema: schema } = await import(${JSON.stringify(join(root, "src/protocol/chat.ts"))});`,
  },
  config: {
    setup: `const { parse } = await import("yaml");
const body = parse(require("node:fs").readFileSync(${JSON.stringify(join(root, "config.example.yaml"))}, "utf8"));
const { ConfigSchema: schema } = await import(${JSON.stringify(join(root, "src/config/schema.ts"))});`,
  },
};

function script(setup: string, jitless: boolean): string {
  return `${setup}
const a = performance.now();
const r = schema.safeParse(body, ${jitless ? "{ jitless: true }" : "undefined"});
const b = performance.now();
schema.safeParse(body, ${jitless ? "{ jitless: true }" : "undefined"});
const c = performance.now();
if (!r.success) throw new Error("the body does not parse");
console.log(JSON.stringify({ first: b - a, second: c - b }));`;
}

function once(setup: string, jitless: boolean): { first: number; second: number } {
  const r = Bun.spawnSync([process.execPath, "-e", script(setup, jitless)], { cwd: root });
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return JSON.parse(r.stdout.toString().trim().split("\n").pop() as string);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};
const ms = (x: number) => x.toFixed(2);

for (const [name, { setup }] of Object.entries(CASES)) {
  const jit: { first: number; second: number }[] = [];
  const plain: { first: number; second: number }[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Alternate which side goes first, so both see the same noise.
    if (i % 2 === 0) {
      jit.push(once(setup, false));
      plain.push(once(setup, true));
    } else {
      plain.push(once(setup, true));
      jit.push(once(setup, false));
    }
  }
  const diff = jit.map((j, i) => j.first - (plain[i] as { first: number }).first);
  console.log(
    `${name}: first parse, compiled ${ms(median(jit.map((r) => r.first)))} ms, jitless ${ms(median(plain.map((r) => r.first)))} ms ` +
      `(paired difference ${ms(median(diff))} ms); second parse ${ms(median(jit.map((r) => r.second)))} / ${ms(median(plain.map((r) => r.second)))} ms; ${RUNS} processes each`,
  );
}
