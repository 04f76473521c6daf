#!/usr/bin/env bun
/**
 * Prompt reuse (issue 22, docs/agent.md#prompt-reuse), measured from llama-server's own counters:
 * of each turn's prompt, the share it processed (`prompt_tokens - cached_tokens` of the chat
 * result's usage, which is `timings.prompt_n` against `cache_n + prompt_n`). Through the compiled
 * core:
 *
 *   memory       turns 2–12 of a conversation whose every input has memory hits   target ≤ 0.35
 *   restart      the first turn after the core restarted (a new llama-server)     target ≤ 0.2
 *   sleep        the first turn after llama-server's idle sleep                  target ≤ 0.2
 *   alternate    two sessions taking turns on one slot (turns after the first)   target ≤ 0.35
 *   long         a 30-turn conversation on a 1,024-token context                  target ≤ 0.5
 *   timing       a random-weight GGUF of a real shape (hidden 512, 16 layers, made here by
 *                test/fixtures/gguf-writer.ts): time to first token after a restart, against
 *                a full prefill of the same prompt                              target ≤ 0.2×
 *   slot files   save and restore on that model, straight to llama-server: ms and bytes per
 *                1,000 tokens (what the save policy in docs/agent.md follows from)
 *
 *   LOCAL_AI_BENCH_LLAMA_SERVER=/path/llama-server LOCAL_AI_BENCH_MODEL=/path/tiny.gguf \
 *     ./node_modules/.bin/bun bench/reuse.ts [scenario…]
 * (LOCAL_AI_TEST_LLAMA_SERVER / LOCAL_AI_TEST_MODEL work too.) Without a real server it runs
 * on the stand-in as a smoke run, and says so; the timing parts need the real one.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnCore } from "../test/fixtures/core-process.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../test/fixtures/llama-stand-in/binary.ts";
import { slotFileCosts, writeTimingModel } from "./reuse/timing-model.ts";

const SERVER = process.env.LOCAL_AI_BENCH_LLAMA_SERVER ?? process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODEL = process.env.LOCAL_AI_BENCH_MODEL ?? process.env.LOCAL_AI_TEST_MODEL;
const real = SERVER !== undefined && MODEL !== undefined;
const work = mkdtempSync(join(tmpdir(), "bench-reuse-"));
const binary = real ? (SERVER as string) : writeFakeLlamaServer(work, { FAKE_LLAMA_LOAD_MS: "30" });
const model = real ? (MODEL as string) : writeFakeModel(work);

type Usage = {
  prompt_tokens?: number;
  cached_tokens?: number;
  ttft_ms?: number;
  prompt_ms?: number;
  /** The host's own clock: from sending the chat to its first token (or its end). */
  first_ms?: number;
  /** Memory passages that matched the input (`memory_done`). */
  hits?: number;
};
type Core = ReturnType<typeof spawnCore>;

/** A folder with a config; `llama.` and `model.` lines added to the defaults. */
function setup(
  name: string,
  lines: string[] = [],
  notes?: string[],
  modelPath = model,
  maxTokens = 24,
): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  if (notes) {
    mkdirSync(join(dir, "notes"), { recursive: true });
    for (const [i, text] of notes.entries()) writeFileSync(join(dir, "notes", `note-${i}.md`), text);
  }
  writeFileSync(
    join(dir, "config.yaml"),
    [
      "app: { data_dir: ./data }",
      `llama: { binary: ${JSON.stringify(binary)}, startup_timeout_s: 120, stop_grace_s: 5${lines
        .filter((l) => l.startsWith("llama."))
        .map((l) => `, ${l.slice(6)}`)
        .join("")} }`,
      `model: { path: ${JSON.stringify(modelPath)}, max_tokens: ${maxTokens}${lines
        .filter((l) => l.startsWith("model."))
        .map((l) => `, ${l.slice(6)}`)
        .join("")} }`,
      "agents: [{ name: assistant, system_prompt: You are a terse assistant who answers in one sentence. }]",
      notes ? "memory: { enabled: true, top_k: 4, folders: [./notes] }" : "memory: { enabled: false }",
    ].join("\n"),
  );
  return dir;
}

let nextId = 0;
async function chat(core: Core, session: string, input: string, clock?: () => number): Promise<Usage> {
  for (let attempt = 0; ; attempt++) {
    const id = ++nextId;
    let first: number | undefined;
    const watch = clock
      ? core
          .waitFor(
            (ms) => ms.some((m) => m.id === id && (m.event === "llm_chunk" || m.type !== "event")),
            300_000,
          )
          .then(() => {
            first = clock();
          })
      : Promise.resolve();
    const r = await core.request({ id, method: "chat", params: { session_id: session, input } }, 300_000);
    await watch;
    const hits = core.messages.find((m) => m.id === id && m.event === "memory_done")?.hits as number;
    if (r.type === "result") return { ...(r.result.usage as Usage), first_ms: first, hits };
    // Random weights now and then write a special token llama-server's output parser refuses
    // ("does not match the expected … format"): that reply is the model's, ask again.
    if (attempt < 3 && /does not match the expected/.test(String(r.message))) continue;
    throw new Error(`chat failed: ${JSON.stringify(r)}\n${core.stderr.slice(-3000)}`);
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

async function stop(core: Core): Promise<void> {
  await core.request({ id: ++nextId, method: "shutdown" }, 60_000);
  await core.exited(60_000);
}

/** processed / prompt over turns. */
function share(turns: Usage[]): number {
  const prompt = turns.reduce((n, u) => n + (u.prompt_tokens ?? 0), 0);
  const cached = turns.reduce((n, u) => n + (u.cached_tokens ?? 0), 0);
  return prompt === 0 ? Number.NaN : (prompt - cached) / prompt;
}

const TOPICS = [
  "the lighthouse on the northern cape and its keeper",
  "baking sourdough bread with a starter kept in the fridge",
  "the tides of the bay and how the moon pulls them",
  "planting tomatoes on a balcony in early spring",
  "the old railway line to the mountain village",
  "repairing a bicycle chain that keeps slipping",
];
const QUESTIONS = Array.from(
  { length: 40 },
  (_, i) => `Question ${i + 1}: what more can you tell me about ${TOPICS[i % TOPICS.length]}?`,
);
const NOTES = TOPICS.flatMap((t, i) => [
  `Notes on ${t}: the first thing to know is that it takes patience, and that the details matter more than the plan. Entry ${i}a.`,
  `More about ${t}: people who tried it say the second attempt went better than the first. Entry ${i}b.`,
]);

const results: { name: string; value: string; target: string; ok: boolean | null }[] = [];
function report(name: string, value: number, target: number, unit = ""): void {
  results.push({
    name,
    value: `${value.toFixed(3)}${unit}`,
    target: `≤ ${target}${unit}`,
    ok: value <= target,
  });
}

async function memoryTurns(): Promise<void> {
  const dir = setup("memory", [], NOTES);
  await using core = spawnCore({ cwd: dir });
  const turns: Usage[] = [];
  for (let i = 0; i < 12; i++) turns.push(await chat(core, "m", QUESTIONS[i] as string));
  const hits = turns.map((t) => t.hits ?? 0);
  process.stdout.write(`memory: passages recalled per turn ${hits.join(" ")}\n`);
  if (Math.min(...hits) === 0) throw new Error("a turn of the memory scenario recalled nothing");
  report("memory: turns 2–12, share processed", share(turns.slice(1)), 0.35);
  await stop(core);
}

async function afterRestart(): Promise<void> {
  const dir = setup("restart");
  {
    await using core = spawnCore({ cwd: dir });
    for (let i = 0; i < 8; i++) await chat(core, "r", QUESTIONS[i] as string);
    await stop(core);
  }
  await using core = spawnCore({ cwd: dir });
  report(
    "restart: first turn after, share processed",
    share([await chat(core, "r", QUESTIONS[8] as string)]),
    0.2,
  );
  await stop(core);
}

async function afterSleep(): Promise<void> {
  const dir = setup("sleep", ["llama.idle_sleep_s: 2"]);
  await using core = spawnCore({ cwd: dir });
  for (let i = 0; i < 8; i++) await chat(core, "z", QUESTIONS[i] as string);
  for (let t = 0; t < 120; t++) {
    const s = await core.request({ id: ++nextId, method: "status" });
    if (s.result.llama.state === "sleeping") break;
    await Bun.sleep(250);
  }
  report(
    "sleep: first turn after, share processed",
    share([await chat(core, "z", QUESTIONS[8] as string)]),
    0.2,
  );
  await stop(core);
}

async function alternating(): Promise<void> {
  const dir = setup("alternate", ["llama.parallel: 1"]);
  await using core = spawnCore({ cwd: dir });
  const turns: Usage[] = [];
  for (let i = 0; i < 12; i++) {
    const u = await chat(core, i % 2 === 0 ? "a" : "b", QUESTIONS[i] as string);
    if (i >= 2) turns.push(u);
  }
  report("alternate: two sessions on one slot, share processed", share(turns), 0.35);
  await stop(core);
}

async function longConversation(): Promise<void> {
  const dir = setup("long", ["model.context: 1024"]);
  await using core = spawnCore({ cwd: dir });
  const turns: Usage[] = [];
  for (let i = 0; i < 30; i++) turns.push(await chat(core, "l", QUESTIONS[i] as string));
  report("long: 30 turns on a 1,024 context, share processed", share(turns), 0.5);
  await stop(core);
}

async function timing(): Promise<void> {
  if (!real) return;
  const big = await writeTimingModel(work, MODEL as string);
  const prompt = (i: number) => `${QUESTIONS[i]} ${"Please consider every detail. ".repeat(40)}`;
  // Two tokens a reply: only the time to the first one is measured, and a random model's
  // longer output strays sooner into what llama-server's tool-call parser refuses.
  const dirOf = (name: string, disk: boolean) =>
    setup(name, ["model.context: 8192", `llama.kv_disk_bytes: ${disk ? 4 * 2 ** 30 : 0}`], undefined, big, 2);
  const saved = dirOf("timing-restored", true);
  const full = dirOf("timing-full", false);
  for (const dir of [saved, full]) {
    await using core = spawnCore({ cwd: dir });
    for (let i = 0; i < 14; i++) await chat(core, "t", prompt(i));
    await stop(core);
  }
  // Each round restarts both: one restores the conversation, the other processes all of it.
  // Timed as the host sees it, from sending the chat to its first token (the restore, which
  // comes before the request, included), once llama-server is up.
  const turnAfterRestart = async (dir: string) => {
    await using core = spawnCore({ cwd: dir });
    await core.request({ id: ++nextId, method: "warmup" }, 300_000);
    const t0 = performance.now();
    const u = await chat(core, "t", "And briefly?", () => performance.now() - t0);
    await stop(core);
    return u;
  };
  const restoredMs: number[] = [];
  const fullMs: number[] = [];
  for (let round = 0; round < 3; round++) {
    const restored = await turnAfterRestart(saved);
    const whole = await turnAfterRestart(full);
    restoredMs.push(restored.first_ms ?? Number.NaN);
    fullMs.push(whole.first_ms ?? Number.NaN);
    process.stdout.write(
      `timing: prompt ${whole.prompt_tokens} tokens; first token after a restart ${restored.first_ms?.toFixed(0)} ms (${restored.cached_tokens} of ${restored.prompt_tokens} restored, prefill ${restored.prompt_ms} ms) vs ${whole.first_ms?.toFixed(0)} ms (full prefill ${whole.prompt_ms} ms)\n`,
    );
  }
  report(
    "timing: first token after a restart / full prefill (medians)",
    median(restoredMs) / median(fullMs),
    0.2,
    "×",
  );
  const costs = await slotFileCosts(SERVER as string, big, work);
  for (const c of costs)
    process.stdout.write(
      `slot files: ${c.tokens} tokens: save ${c.saveMs.toFixed(1)} ms, restore ${c.restoreMs.toFixed(1)} ms, ${(c.bytes / 2 ** 20).toFixed(1)} MiB; per 1,000 tokens ${((c.saveMs * 1000) / c.tokens).toFixed(1)} ms save, ${((c.restoreMs * 1000) / c.tokens).toFixed(1)} ms restore, ${((c.bytes * 1000) / c.tokens / 2 ** 20).toFixed(1)} MiB; prefill of the same ${c.prefillMs.toFixed(0)} ms\n`,
    );
}

const SCENARIOS: Record<string, () => Promise<void>> = {
  memory: memoryTurns,
  restart: afterRestart,
  sleep: afterSleep,
  alternate: alternating,
  long: longConversation,
  timing,
};
const chosen = process.argv.slice(2);
process.stdout.write(
  real
    ? `llama-server ${SERVER}, model ${MODEL}\n`
    : "no LOCAL_AI_BENCH_LLAMA_SERVER/LOCAL_AI_BENCH_MODEL: a smoke run on the stand-in (its counters, not llama-server's)\n",
);
try {
  for (const [name, run] of Object.entries(SCENARIOS))
    if (chosen.length === 0 || chosen.includes(name)) await run();
} finally {
  rmSync(work, { recursive: true, force: true });
}
for (const r of results)
  process.stdout.write(
    `${r.name.padEnd(56)} ${r.value.padStart(8)}  (target ${r.target})${r.ok ? "" : "  MISSED"}\n`,
  );
