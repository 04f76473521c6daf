#!/usr/bin/env bun
/**
 * Several models (issue 28, docs/models.md "Several models"), each target side by side with
 * llama-server's own router (`--models-dir`, `--models-max`) on the same GGUFs in the same run,
 * the two sides taking turns:
 *
 *   warm     a chat on a model already loaded: the core with `models:` configured against the
 *            core without (same model, same prompt), and the router against its own child asked
 *            directly (its proxy's cost)                                     no added cost
 *   swap     two random-weight llamas (512×16 and 640×12, F16, ~170 and ~200 MB, written here by
 *            test/fixtures/gguf-writer.ts with tiny-llama's tokenizer), a budget
 *            (`hardware.ram_bytes`) only one fits; request → first token on the other model,
 *            against the router with `--models-max 1`                 ≤ 1.1× the router's
 *   back     the first turn back on a conversation whose model was swapped out: the share of
 *            its prompt llama-server processed (`timings.prompt_n` of prompt_n + cache_n; the
 *            core's usage: prompt_tokens − cached_tokens of prompt_tokens)            ≤ 0.2
 *   embed    1,000 short texts: the core's `embed` against llama-server's `/v1/embeddings` called
 *            directly with the plan's argv (all 1,000 in one request)   ≥ 0.9× the throughput
 *   memory   during swap and back: the loaded models' plans (status.memory, status.models) and
 *            their llama-servers' RSS against the budget; the router with `--models-max 2` after
 *            a chat on each                                      the core's never over it
 *
 *   LOCAL_AI_BENCH_LLAMA_SERVER=/path/llama-server LOCAL_AI_BENCH_MODELS=/path/to/models-folder \
 *     ./node_modules/.bin/bun bench/models.ts [part…]
 * The folder holds tiny-llama.gguf, tiny-llama-q8.gguf and tiny-embed.gguf (llama.cpp's tiny test
 * models, test/fixtures/llama-server/README.md). BENCH_WARM_RUNS (12), BENCH_SWAP_RUNS (6),
 * BENCH_BACK_RUNS (3), BENCH_EMBED_RUNS (5) size it; LOCAL_AI_BENCH_CORE runs another build.
 * Needs a real llama-server with router mode: there is no stand-in run.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary } from "../test/fixtures/core-process.ts";
import { childrenOf, Router, rssBytes } from "./models/router.ts";
import { CoreProcess } from "./overhead/core.ts";
import { DirectServer } from "./overhead/direct.ts";
import { type SseChat, sseChat } from "./overhead/sse-chat.ts";
import { median, spread, ttft } from "./overhead/stream-timing.ts";
import { writeTimingModel } from "./reuse/timing-model.ts";

const SERVER = process.env.LOCAL_AI_BENCH_LLAMA_SERVER ?? process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODELS = process.env.LOCAL_AI_BENCH_MODELS ?? "/work/shared/models";
if (!SERVER || !existsSync(join(MODELS, "tiny-llama.gguf"))) {
  process.stdout.write(
    "bench/models.ts needs a real llama-server (LOCAL_AI_BENCH_LLAMA_SERVER) and LOCAL_AI_BENCH_MODELS, a folder\n" +
      "with tiny-llama.gguf, tiny-llama-q8.gguf and tiny-embed.gguf: nothing measured.\n",
  );
  process.exit(0);
}
const TINY = join(MODELS, "tiny-llama.gguf");
const TINY_Q8 = join(MODELS, "tiny-llama-q8.gguf");
const EMBED = join(MODELS, "tiny-embed.gguf");
const WARM_RUNS = Number(process.env.BENCH_WARM_RUNS ?? 12);
const SWAP_RUNS = Number(process.env.BENCH_SWAP_RUNS ?? 6);
const BACK_RUNS = Number(process.env.BENCH_BACK_RUNS ?? 3);
const EMBED_RUNS = Number(process.env.BENCH_EMBED_RUNS ?? 5);
/** Context per model in the swap parts: both plans are ~520 MB with it (256 MiB of it --cache-ram). */
const CONTEXT = 2048;
/** Only one of the two swap models' plans fits (517 and 531 MB on this build), both of their servers' RSS does not. */
const BUDGET = Number(process.env.BENCH_RAM_BYTES ?? 700_000_000);
const SYSTEM = "You are a terse assistant who answers in one sentence.";
/** What the router's children get, as the core's plan gives its own (docs/plan.md). */
const ROUTER_ARGS = [
  "-c",
  String(CONTEXT),
  "-np",
  "1",
  "-t",
  "2",
  "-fa",
  "auto",
  "--jinja",
  "--cache-ram",
  "256",
];

const work = mkdtempSync(join(tmpdir(), "bench-models-"));
const core = process.env.LOCAL_AI_BENCH_CORE ?? ensureBinary();
const lines: string[] = [];
const verdict = (ok: boolean) => (ok ? "met" : "NOT met");

function config(name: string, yaml: string[]): { dir: string; path: string } {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "config.yaml");
  writeFileSync(
    path,
    [
      `app: { data_dir: ${JSON.stringify(join(dir, "data"))} }`,
      `agents: [{ name: assistant, system_prompt: ${JSON.stringify(SYSTEM)}, temperature: 0 }]`,
      ...yaml,
    ].join("\n"),
  );
  return { dir, path };
}

const llamaLine = (extra = "") =>
  `llama: { binary: ${JSON.stringify(SERVER)}, parallel: 1, startup_timeout_s: 120, stop_grace_s: 5${extra} }`;

interface CoreTurn extends SseChat {
  promptTokens?: number;
  cachedTokens?: number;
}

/** A chat through the core, timed as the host sees it; a reply llama-server's parser refused is asked again. */
async function coreChat(proc: CoreProcess, params: Record<string, unknown>): Promise<CoreTurn> {
  for (let attempt = 0; ; attempt++) {
    // The same input again gets the same greedy reply: the retry adds a word.
    const input = `${params.input}${" Again.".repeat(attempt)}`;
    const c = await proc.request("chat", { ...params, input });
    const done = performance.now();
    const t = c.terminal as { type?: string; message?: string; result?: Record<string, any> };
    if (t.type === "result") {
      const usage = (t.result?.usage ?? {}) as Record<string, number>;
      return {
        sent: c.sent,
        first: c.pieces > 0 ? c.first : done,
        last: c.last,
        pieces: c.pieces,
        chars: c.chars,
        firstChars: c.firstChars,
        text: String(t.result?.text ?? ""),
        promptMs: usage.prompt_ms,
        promptTokens: usage.prompt_tokens,
        cachedTokens: usage.cached_tokens,
      };
    }
    // Random weights now and then write what llama-server's output parser refuses: ask again.
    if (attempt < 6 && /does not match the expected/.test(String(t.message))) continue;
    throw new Error(`chat failed: ${JSON.stringify(c.terminal)}`);
  }
}

async function ready(proc: CoreProcess, load?: string): Promise<void> {
  await proc.request("initialize", { protocol_versions: [1] });
  const up = load ? await proc.request("models.load", { model: load }) : await proc.request("warmup");
  if (up.terminal.type !== "result") throw new Error(`load failed: ${JSON.stringify(up.terminal)}`);
}

async function stopCore(proc: CoreProcess): Promise<void> {
  if ((await Promise.race([proc.shutdown(), Bun.sleep(60_000).then(() => null)])) === null) proc.kill();
}

/** Runs `a` and `b` `runs` times, alternating which goes first. */
async function alternate(runs: number, a: () => Promise<void>, b: () => Promise<void>): Promise<void> {
  for (let i = 0; i < runs; i++) {
    if (i % 2 === 0) await a().then(b);
    else await b().then(a);
  }
}

// ---- warm: a chat on a loaded model ---------------------------------------------------------

async function warm(): Promise<void> {
  const input = "Tell me a short story about a lighthouse keeper.";
  const base = [
    llamaLine(),
    `model: { path: ${JSON.stringify(TINY)}, max_tokens: 32 }`,
    "memory: { enabled: false }",
  ];
  const one = config("warm-one", base);
  const several = config("warm-several", [
    ...base,
    `models: [{ name: second, path: ${JSON.stringify(TINY_Q8)}, max_tokens: 32 }]`,
  ]);
  const plain = CoreProcess.spawn(core, one.dir, one.path);
  const multi = CoreProcess.spawn(core, several.dir, several.path);
  const router = await Router.start(SERVER as string, work, { tiny: TINY }, 2, ["-np", "1", "-t", "2"]);
  try {
    await ready(plain);
    await ready(multi);
    await router.chat("tiny", [{ role: "user", content: input }], 32);
    const child = (await router.loaded()).find((m) => m.name === "tiny");
    if (!child) throw new Error("the router loaded no tiny");
    const childUrl = `http://127.0.0.1:${child.port}`;
    const messages = [
      { role: "system", content: SYSTEM },
      { role: "user", content: input },
    ];
    await coreChat(plain, { input });
    await coreChat(multi, { input });
    const t = { plain: [] as number[], multi: [] as number[], router: [] as number[], child: [] as number[] };
    const total = { plain: [] as number[], multi: [] as number[] };
    await alternate(
      WARM_RUNS,
      async () => {
        const c = await coreChat(plain, { input });
        t.plain.push(ttft(c));
        total.plain.push(c.last - c.sent);
        t.router.push(ttft(await router.chat("tiny", messages, 32)));
      },
      async () => {
        const c = await coreChat(multi, { input });
        t.multi.push(ttft(c));
        total.multi.push(c.last - c.sent);
        t.child.push(ttft(await sseChat(childUrl, { messages, max_tokens: 32 })));
      },
    );
    const extra = t.multi.map((m, i) => m - (t.plain[i] as number));
    const extraTotal = total.multi.map((m, i) => m - (total.plain[i] as number));
    const proxy = t.router.map((r, i) => r - (t.child[i] as number));
    lines.push(
      `warm chat, ${WARM_RUNS} pairs, tiny-llama, 32 tokens (ms, median (min–max)):\n` +
        `  core, one model: first token ${spread(t.plain, 2)}; core with models: configured ${spread(t.multi, 2)}\n` +
        `  with − without, paired: first token ${spread(extra, 2)}, whole reply ${spread(extraTotal, 2)}; ` +
        `target no added cost (≤ +2 ms, the chat-overhead bound): ${verdict(median(extra) <= 2)}\n` +
        `  router: first token ${spread(t.router, 2)} against its child asked directly ${spread(t.child, 2)}; ` +
        `the router's proxy, paired: ${spread(proxy, 2)}`,
    );
  } finally {
    await stopCore(plain);
    await stopCore(multi);
    await router.stop();
  }
}

// ---- memory: what is loaded against the budget ----------------------------------------------

interface MemorySample {
  planned: number;
  budget: number;
  rowsBytes: number;
  rss: number;
  loaded: number;
  /** Each model's state then, for the report of the highest sample. */
  states: string;
}
const coreSamples: MemorySample[] = [];
let routerBothRss = Number.NaN;

/** Samples the core's status and its llama-servers' RSS every 100 ms until `stop()`. */
function sampleMemory(proc: CoreProcess): { stop(): Promise<void> } {
  let on = true;
  const loop = (async () => {
    while (on) {
      const s = await proc.request("status");
      const r = (s.terminal as { result?: Record<string, any> }).result ?? {};
      const mem = (r.memory ?? []) as { device: string; budget_bytes: number; planned_bytes: number }[];
      const rows = (r.models ?? []) as {
        name: string;
        memory_bytes: number | null;
        state: string;
        pid: number | null;
      }[];
      const live = childrenOf(proc.pid);
      const cpu = mem.find((m) => m.device === "cpu");
      coreSamples.push({
        planned: cpu?.planned_bytes ?? Number.NaN,
        budget: cpu?.budget_bytes ?? Number.NaN,
        // What the models whose llama-server runs now hold (their plans' bytes).
        rowsBytes: rows.reduce(
          (n, m) => n + (m.pid !== null && live.includes(m.pid) ? (m.memory_bytes ?? 0) : 0),
          0,
        ),
        rss: live.reduce((n, pid) => n + rssBytes(pid), 0),
        loaded: rows.filter((m) => m.state !== "unloaded").length,
        states: rows.map((m) => `${m.name} ${m.state} ${m.memory_bytes ?? "-"}`).join(", "),
      });
      await Bun.sleep(100);
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
    },
  };
}

// ---- swap and back: two models of which one fits ---------------------------------------------

async function bigModels(): Promise<{ a: string; b: string }> {
  const dir = join(work, "big");
  return {
    a: await writeTimingModel(dir, TINY),
    b: await writeTimingModel(dir, TINY, { embd: 640, layers: 12, ff: 1728 }),
  };
}

function budgetCore(name: string, a: string, b: string): CoreProcess {
  const c = config(name, [
    llamaLine(),
    `hardware: { ram_bytes: ${BUDGET} }`,
    `model: { path: ${JSON.stringify(a)}, context: ${CONTEXT}, max_tokens: 1 }`,
    `models: [{ name: b, path: ${JSON.stringify(b)}, context: ${CONTEXT}, max_tokens: 1 }]`,
    "memory: { enabled: false }",
  ]);
  return CoreProcess.spawn(core, c.dir, c.path);
}

async function swap(big: { a: string; b: string }): Promise<void> {
  const proc = budgetCore("swap", big.a, big.b);
  const router = await Router.start(SERVER as string, work, { a: big.a, b: big.b }, 1, ROUTER_ARGS);
  const coreMs: number[] = [];
  const routerMs: number[] = [];
  const input = "Hello there, how are you today?";
  // The same prompt on both sides: the core's agent sends its system prompt (36 tokens in all).
  const messages = [
    { role: "system", content: SYSTEM },
    { role: "user", content: input },
  ];
  try {
    await ready(proc);
    const sampler = sampleMemory(proc);
    await coreChat(proc, { input });
    await router.chat("a", messages, 1);
    // Each timed request asks for the model that is not loaded: a → b, then b → a, and so on.
    let coreOn = "default";
    let routerOn = "a";
    await alternate(
      SWAP_RUNS,
      async () => {
        coreOn = coreOn === "default" ? "b" : "default";
        coreMs.push(ttft(await coreChat(proc, { input, model: coreOn })));
      },
      async () => {
        routerOn = routerOn === "a" ? "b" : "a";
        routerMs.push(ttft(await router.chat(routerOn, messages, 1)));
      },
    );
    await sampler.stop();
    const ratio = coreMs.map((c, i) => c / (routerMs[i] as number));
    lines.push(
      `swap, ${SWAP_RUNS} each, alternating, budget ${BUDGET} bytes (ms, median (min–max)):\n` +
        `  request → first token on the other model: core ${spread(coreMs, 0)}, router --models-max 1 ${spread(routerMs, 0)}\n` +
        `  core/router, paired: ${spread(ratio, 3)}; target ≤ 1.1×: ${verdict(median(coreMs) / median(routerMs) <= 1.1)} ` +
        `(ratio of medians ${(median(coreMs) / median(routerMs)).toFixed(3)})`,
    );
  } finally {
    await stopCore(proc);
    await router.stop();
  }
}

const padding = "Please consider every detail of it, and keep the answer short. ".repeat(12);
const turnInput = (round: number, i: number) => `Round ${round}, question ${i + 1}: what of it? ${padding}`;
const TURNS = 6;

async function back(big: { a: string; b: string }): Promise<void> {
  const proc = budgetCore("back", big.a, big.b);
  const router = await Router.start(SERVER as string, work, { a: big.a, b: big.b }, 1, ROUTER_ARGS);
  const coreShare: number[] = [];
  const routerShare: number[] = [];
  const coreFirst: number[] = [];
  const routerFirst: number[] = [];
  const promptSizes: number[] = [];
  try {
    await ready(proc);
    const sampler = sampleMemory(proc);
    const viaCore = async (round: number) => {
      const session = `conv-${round}`;
      for (let i = 0; i < TURNS; i++)
        await coreChat(proc, { input: turnInput(round, i), session_id: session });
      await coreChat(proc, { input: "Something else entirely.", model: "b" });
      const t = await coreChat(proc, { input: turnInput(round, TURNS), session_id: session });
      const prompt = t.promptTokens ?? Number.NaN;
      coreShare.push((prompt - (t.cachedTokens ?? 0)) / prompt);
      coreFirst.push(ttft(t));
      promptSizes.push(prompt);
    };
    const viaRouter = async (round: number) => {
      const messages: unknown[] = [{ role: "system", content: SYSTEM }];
      for (let i = 0; i < TURNS; i++) {
        messages.push({ role: "user", content: turnInput(round, i) });
        const r = await router.chat("a", messages, 1);
        messages.push({ role: "assistant", content: r.text });
      }
      await router.chat("b", [{ role: "user", content: "Something else entirely." }], 1);
      messages.push({ role: "user", content: turnInput(round, TURNS) });
      const t = await router.chat("a", messages, 1);
      const n = (t.promptN ?? Number.NaN) + (t.cacheN ?? 0);
      routerShare.push((t.promptN ?? Number.NaN) / n);
      routerFirst.push(ttft(t));
      promptSizes.push(n);
    };
    for (let round = 0; round < BACK_RUNS; round++) {
      if (round % 2 === 0) await viaCore(round).then(() => viaRouter(round));
      else await viaRouter(round).then(() => viaCore(round));
    }
    await sampler.stop();
    lines.push(
      `back on a swapped-out conversation, ${BACK_RUNS} each (${TURNS} turns on a, one on b, then a again; prompts ${spread(promptSizes, 0)} tokens):\n` +
        `  share of the prompt processed: core ${spread(coreShare, 3)}, router ${spread(routerShare, 3)}; target ≤ 0.2: ${verdict(median(coreShare) <= 0.2)}\n` +
        `  request → first token (the swap back included): core ${spread(coreFirst, 0)} ms, router ${spread(routerFirst, 0)} ms`,
    );
  } finally {
    await stopCore(proc);
    await router.stop();
  }
}

async function routerMemory(big: { a: string; b: string }): Promise<void> {
  const router = await Router.start(SERVER as string, work, { a: big.a, b: big.b }, 2, ROUTER_ARGS);
  try {
    for (const m of ["a", "b"]) await router.chat(m, [{ role: "user", content: turnInput(0, 0) }], 1);
    routerBothRss = router.children().reduce((n, pid) => n + rssBytes(pid), 0);
    if (router.children().length !== 2)
      throw new Error(`the router runs ${router.children().length} children, not 2`);
  } finally {
    await router.stop();
  }
}

function memoryLine(): void {
  const mb = (x: number) => `${(x / 1e6).toFixed(0)} MB`;
  const max = (f: (s: MemorySample) => number) =>
    Math.max(...coreSamples.map(f).filter((x) => !Number.isNaN(x)));
  const budget = coreSamples[0]?.budget ?? Number.NaN;
  const planned = max((s) => s.planned);
  const rows = max((s) => s.rowsBytes);
  const rss = max((s) => s.rss);
  const ok = rows <= BUDGET && rss <= BUDGET;
  const over = coreSamples.filter((s) => s.planned > BUDGET);
  const worst = coreSamples.find((s) => s.planned === planned);
  lines.push(
    `memory, ${coreSamples.length} samples of the core over swap and back (most at once: ${max((s) => s.loaded)} loaded):\n` +
      `  budget ${mb(BUDGET)} (status.memory says ${mb(budget)}); highest: the plans of the models whose llama-server runs ` +
      `(status.models) ${mb(rows)}, those llama-servers' RSS ${mb(rss)}; target never over the budget: ${verdict(ok)}\n` +
      `  status.memory planned_bytes (a load's bytes held from its admission, a leaving model's until it stopped): highest ` +
      `${mb(planned)}, over the budget in ${over.length} samples; the highest: ${worst?.states} (RSS then ${mb(worst?.rss ?? Number.NaN)})\n` +
      `  router --models-max 2 after a chat on each: its children's RSS ${mb(routerBothRss)} ` +
      `(${routerBothRss > BUDGET ? "over" : "within"} the budget)`,
  );
}

// ---- embed: 1,000 short texts ----------------------------------------------------------------

async function embedding(): Promise<void> {
  const c = config("embed", [
    llamaLine(),
    `model: { path: ${JSON.stringify(TINY)} }`,
    `models: [{ name: embed, path: ${JSON.stringify(EMBED)}, kind: embedding, extra_args: ["--embeddings"] }]`,
    "memory: { enabled: false, embedding_model: embed }",
  ]);
  const plan = Bun.spawnSync([core, "plan", "--json", "--model", "embed", "--config", c.path], {
    cwd: c.dir,
  });
  if (plan.exitCode !== 0) throw new Error(`plan failed: ${plan.stderr.toString()}`);
  const argv = (JSON.parse(plan.stdout.toString()) as { plan: { argv: string[] } }).plan.argv;
  const slots = argv.indexOf("--slot-save-path");
  if (slots >= 0) mkdirSync(argv[slots + 1] as string, { recursive: true });
  const texts = Array.from(
    { length: 1000 },
    (_, i) => `Note ${i}: the keeper lit the lamp at dusk and logged ${i % 7} ships passing the cape.`,
  );
  const direct = await DirectServer.start(SERVER as string, argv);
  const proc = CoreProcess.spawn(core, c.dir, c.path);
  const coreRate: number[] = [];
  const directRate: number[] = [];
  try {
    await ready(proc, "embed");
    const viaCore = async () => {
      const t0 = performance.now();
      const r = await proc.request("embed", { model: "embed", input: texts });
      const ms = performance.now() - t0;
      const out = (r.terminal as { result?: { embeddings?: unknown[] } }).result;
      if (out?.embeddings?.length !== texts.length)
        throw new Error(`embed failed: ${JSON.stringify(r.terminal)}`);
      coreRate.push((texts.length * 1000) / ms);
    };
    const plain = async () => {
      const t0 = performance.now();
      const res = await fetch(`${direct.baseUrl}/v1/embeddings`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${direct.apiKey}` },
        body: JSON.stringify({ input: texts }),
      });
      const body = (await res.json()) as { data?: unknown[] };
      const ms = performance.now() - t0;
      if (body.data?.length !== texts.length) throw new Error(`/v1/embeddings answered ${res.status}`);
      directRate.push((texts.length * 1000) / ms);
    };
    await viaCore();
    await plain();
    coreRate.length = 0;
    directRate.length = 0;
    await alternate(EMBED_RUNS, viaCore, plain);
    const ratio = coreRate.map((r, i) => r / (directRate[i] as number));
    lines.push(
      `embed, 1,000 short texts, ${EMBED_RUNS} each, alternating (texts/s, median (min–max)):\n` +
        `  core ${spread(coreRate, 0)}, llama-server /v1/embeddings directly ${spread(directRate, 0)}\n` +
        `  core/direct, paired: ${spread(ratio, 3)}; target ≥ 0.9×: ${verdict(median(ratio) >= 0.9)}`,
    );
  } finally {
    await stopCore(proc);
    await direct.stop();
  }
}

const PARTS: Record<string, () => Promise<void>> = {
  warm,
  swap: async () => swap(await bigModels()),
  back: async () => back(await bigModels()),
  memory: async () => {
    const big = await bigModels();
    if (coreSamples.length === 0) await swap(big);
    await routerMemory(big);
    memoryLine();
  },
  embed: embedding,
};
const chosen = process.argv.slice(2);
process.stdout.write(`llama-server ${SERVER}\ncore ${core}\nload average ${loadAverage()}\n`);
try {
  for (const [name, run] of Object.entries(PARTS)) {
    if (chosen.length > 0 && !chosen.includes(name)) continue;
    try {
      await run();
    } catch (err) {
      lines.push(`${name}: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    }
    process.stdout.write(`${lines.at(-1)}\n`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.stdout.write(`\nload average ${loadAverage()}\n\n${lines.join("\n")}\n`);

function loadAverage(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    return "n/a";
  }
}
