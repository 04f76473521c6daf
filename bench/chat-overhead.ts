#!/usr/bin/env bun
/**
 * Chat overhead, side by side (issue 11 item 4): the compiled core against the same
 * llama-server started directly with the plan's argv, the two sides taking turns so both see
 * the same noise.
 *
 *   LOCAL_AI_BENCH_LLAMA_SERVER=/path/llama-server LOCAL_AI_BENCH_MODEL=/path/model.gguf \
 *     ./node_modules/.bin/bun bench/chat-overhead.ts            (or: ... chat-overhead.ts SERVER MODEL)
 *
 * Cold: a fresh core per run (initialize answered first), `chat` sent → first `llm_chunk`,
 * against llama-server spawned directly → first /health 200 (polled every 2 ms) + its own time
 * to the first content delta. Warm: one core and one direct server, both loaded, long replies
 * bounded by the same max_tokens: time to first token and the chunk rate (first to last piece).
 * Reasoning: the same warm pairs with the thinking template of the recordings
 * (chatml_think.jinja through llama.extra_args, so the direct side gets it from the plan's argv
 * too): the whole reply streams as reasoning_content, forwarded as llm_reasoning, and its rate
 * and first token are held to the same targets as content's.
 * Each warm comparison also runs the bare relay (overhead/relay.ts) against the direct server,
 * the three sides taking turns: the core's CPU per piece against the least a core must spend
 * (issue 31, docs/performance.md "Where a streamed piece's CPU goes").
 * Content and reasoning run round by round in the same run (each with its own direct server,
 * core and relay), and the core's CPU per reasoning piece is paired with its CPU per content
 * piece of the same round (docs/performance.md, "Reasoning pieces against content pieces").
 * BENCH_COLD_RUNS (default 8), BENCH_WARM_RUNS (8), BENCH_REASONING_RUNS (8), BENCH_MAX_TOKENS
 * (1000) size it (0 runs skips a part), BENCH_WARMUP_CHATS (1) the unrecorded chats before them,
 * BENCH_GATHER_MS the core's app.stream_gather_ms (docs/performance.md, "Joined pieces");
 * BENCH_SETTLE_MS (10) how long every process must have been quiet before a warm side starts
 * (0: back to back, as before; docs/performance.md, "The side before");
 * BENCH_COLD_MEMO=1 seeds each later cold core's data_dir with the listing memo (below);
 * BENCH_COLD_KEPT=1 starts each cold core on a copy of an unrecorded first core's data_dir;
 * LOCAL_AI_BENCH_CORE runs another build of the core. With
 * no real server given it runs against the stand-in as a smoke run, and says so.
 */
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary } from "../test/fixtures/core-process.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../test/fixtures/llama-stand-in/binary.ts";
import { THINK_TEMPLATE } from "../test/fixtures/recordings-dir.ts";
import { type CoreChat, CoreProcess } from "./overhead/core.ts";
import { childPids, cpuSpent, selfCpuNs, type ThreadTimes, threadTimes } from "./overhead/cpu-time.ts";
import { DirectServer } from "./overhead/direct.ts";
import { settle } from "./overhead/settle.ts";
import {
  median,
  medianInterval,
  ownPath,
  rate,
  type StreamTiming,
  spread,
  tokensOf,
  ttft,
  ttftBeyondPrompt,
} from "./overhead/stream-timing.ts";

const COLD_RUNS = Number(process.env.BENCH_COLD_RUNS ?? 8);
const WARM_RUNS = Number(process.env.BENCH_WARM_RUNS ?? 8);
const REASONING_RUNS = Number(process.env.BENCH_REASONING_RUNS ?? 8);
/** The thinking template the recordings used (91–91i). */
const MAX_TOKENS = Number(process.env.BENCH_MAX_TOKENS ?? 1000);
/**
 * Unrecorded chats through the core and the relay before a warm comparison: the core's JIT
 * still moves code up its tiers after tens of chats (docs/performance.md, "Reasoning pieces
 * against content pieces"), which a short run counts against the stream path.
 */
const WARMUP_CHATS = Math.max(1, Number(process.env.BENCH_WARMUP_CHATS ?? 1));
/** The core's `app.stream_gather_ms` (BENCH_GATHER_MS); unset: its default. */
const GATHER_MS = process.env.BENCH_GATHER_MS === undefined ? undefined : Number(process.env.BENCH_GATHER_MS);
/** A warm side starts once the bench's processes have all been quiet this long (BENCH_SETTLE_MS). */
const SETTLE = {
  quietMs: Number(process.env.BENCH_SETTLE_MS ?? 10),
  maxMs: 250,
  slackNs: 200_000,
  stepMs: 2,
};
/** A cold run needs only the first token; a short reply keeps it quick. */
const COLD_MAX_TOKENS = 16;
const SYSTEM = "You are a helpful assistant.";
const INPUT = "Tell me a very long story about a lighthouse keeper.";
const MESSAGES = [
  { role: "system", content: SYSTEM },
  { role: "user", content: INPUT },
];

const work = mkdtempSync(join(tmpdir(), "bench-chat-overhead-"));
const target = resolveTarget();
/** The compiled core; LOCAL_AI_BENCH_CORE names another build (e.g. an older one, to compare). */
const core = process.env.LOCAL_AI_BENCH_CORE ?? ensureBinary();

function resolveTarget(): { server: string; model: string; smoke: boolean } {
  const server = process.argv[2] ?? process.env.LOCAL_AI_BENCH_LLAMA_SERVER;
  const model = process.argv[3] ?? process.env.LOCAL_AI_BENCH_MODEL;
  if (server && model) return { server, model, smoke: false };
  process.stdout.write(
    "SMOKE RUN: no real llama-server given (LOCAL_AI_BENCH_LLAMA_SERVER and LOCAL_AI_BENCH_MODEL, or two\n" +
      "arguments); running against the stand-in. These numbers are NOT the target's: the stand-in is a\n" +
      "Bun script with its own pace, and the targets below are judged against a real llama-server only.\n",
  );
  const reply = Array.from({ length: 4000 }, (_, i) => `w${i} `).join("");
  return {
    server: writeFakeLlamaServer(work, { FAKE_LLAMA_REPLY: reply, FAKE_LLAMA_CHUNK_DELAY_MS: "1" }),
    model: writeFakeModel(work),
    smoke: true,
  };
}

/**
 * A folder with a config.yaml for one core; memory off keeps the prompt equal on both sides.
 * `extraArgs` go to llama-server, and so into the planned argv the direct side runs.
 */
function coreDir(
  name: string,
  maxTokens: number,
  memory: boolean,
  extraArgs: string[] = [],
): { dir: string; config: string } {
  const dir = join(work, name);
  const config = join(work, `${name}.yaml`);
  writeFileSync(
    config,
    [
      `app: { data_dir: ${JSON.stringify(dir)}${GATHER_MS === undefined ? "" : `, stream_gather_ms: ${GATHER_MS}`} }`,
      `llama: { binary: ${JSON.stringify(target.server)}, startup_timeout_s: 120, extra_args: ${JSON.stringify(extraArgs)} }`,
      `model: { path: ${JSON.stringify(target.model)}, max_tokens: ${maxTokens} }`,
      `memory: { enabled: ${memory} }`,
      `agents: [{ name: assistant, system_prompt: ${JSON.stringify(SYSTEM)}, temperature: 0 }]`,
    ].join("\n"),
  );
  return { dir: work, config };
}

/** The planned argv, from the compiled core's own `plan --json` (what the supervisor launches). */
function plannedArgv(config: string): string[] {
  const r = Bun.spawnSync([core, "plan", "--json", "--config", config], { cwd: work });
  if (r.exitCode !== 0) throw new Error(`local-ai plan failed: ${r.stderr.toString()}`);
  const argv = (JSON.parse(r.stdout.toString()) as { plan: { argv: string[] } }).plan.argv;
  // The folder the supervisor makes before its spawn (llama-server refuses one that is missing).
  const slots = argv.indexOf("--slot-save-path");
  if (slots >= 0) mkdirSync(argv[slots + 1] as string, { recursive: true });
  return argv;
}

interface ColdDirect {
  ready: number;
  ttft: number;
}

async function coldDirect(argv: string[]): Promise<ColdDirect> {
  const server = await DirectServer.start(target.server, argv);
  try {
    const t = await server.chat(MESSAGES, COLD_MAX_TOKENS);
    return { ready: server.readyMs, ttft: ttft(t) };
  } finally {
    await server.stop();
  }
}

/**
 * BENCH_COLD_MEMO=1: each cold core after the first finds the first one's listing memo in its
 * data_dir, as a core restarted on one data_dir does (plan/listing-memo.ts: a CPU build's `(none)`);
 * else every cold core asks llama-server --list-devices, as a first start does.
 */
const COLD_MEMO = process.env.BENCH_COLD_MEMO === "1";

/**
 * BENCH_COLD_KEPT=1: each cold core starts on a copy of the data_dir a first, unrecorded core left
 * at its shutdown (its database at the latest schema, the disk reserve, the import marker, the
 * listing memo): an app's every launch but its first. Else every cold core makes its data_dir new.
 */
const COLD_KEPT = process.env.BENCH_COLD_KEPT === "1";

async function coldCore(run: number | "seed"): Promise<CoreChat> {
  const { dir, config } = coreDir(`cold-${run}`, COLD_MAX_TOKENS, true);
  const memo = join(work, "cold-0", "cache", "list-devices.json");
  if (COLD_KEPT && run !== "seed")
    cpSync(join(work, "cold-seed"), join(work, `cold-${run}`), { recursive: true });
  else if (COLD_MEMO && run !== "seed" && run > 0 && existsSync(memo)) {
    mkdirSync(join(work, `cold-${run}`, "cache"), { recursive: true, mode: 0o700 });
    copyFileSync(memo, join(work, `cold-${run}`, "cache", "list-devices.json"));
  }
  const proc = CoreProcess.spawn(core, dir, config);
  try {
    await proc.request("initialize", { protocol_versions: [1] });
    const chat = await proc.request("chat", { input: INPUT });
    if (chat.terminal.type !== "result")
      throw new Error(`cold chat failed: ${JSON.stringify(chat.terminal)}`);
    return chat;
  } finally {
    if ((await Promise.race([proc.shutdown(), Bun.sleep(30_000).then(() => null)])) === null) proc.kill();
  }
}

const verdict = (ok: boolean) => (ok ? "met" : "NOT met");

async function cold(argv: string[]): Promise<void> {
  const direct: ColdDirect[] = [];
  const through: CoreChat[] = [];
  if (COLD_KEPT) await coldCore("seed");
  for (let i = 0; i < COLD_RUNS; i++) {
    // Alternate which side goes first, so neither always runs on a cache the other warmed.
    if (i % 2 === 0) {
      direct.push(await coldDirect(argv));
      through.push(await coldCore(i));
    } else {
      through.push(await coldCore(i));
      direct.push(await coldDirect(argv));
    }
  }
  const budget = direct.map((d) => d.ready + d.ttft);
  const firstChunk = through.map((c) => c.first - c.sent);
  const over = firstChunk.map((c, i) => c - (budget[i] as number));
  const mark = (name: string) => spread(through.map((c) => c.marks[name] ?? Number.NaN));
  process.stdout.write(
    `\ncold chat, ${COLD_RUNS} runs each, alternating (ms, median (min–max)); data_dir ${COLD_KEPT ? "a copy of a first core's" : "new each core"}:\n` +
      `  direct llama-server: ready ${spread(direct.map((d) => d.ready))}, first token ${spread(direct.map((d) => d.ttft))}, ready + first token ${spread(budget)}\n` +
      `  through the core:    chat → first llm_chunk ${spread(firstChunk)}\n` +
      `    (chat → run_start ${mark("run_start")}, memory_done ${mark("memory_done")}, llm_start ${mark("llm_start")})\n` +
      `  core − direct, paired: ${spread(over)} ms; target ≤ +40 ms: ${verdict(median(over) <= 40)}\n`,
  );
}

/** A warm chat's stream and the CPU time (ns) each process spent on it. */
interface Measured {
  t: StreamTiming;
  /** The core (0 on the direct side), llama-server, and this bench reading the stream. */
  core: number;
  llama: number;
  reader: number;
  /** The core's (or the relay's) CPU by thread name, ns. */
  threads: Map<string, number>;
}

async function measured(
  pids: { core?: number; llama: number },
  chat: () => Promise<StreamTiming>,
): Promise<Measured> {
  const none: ThreadTimes = new Map();
  const before = {
    core: pids.core ? threadTimes(pids.core) : none,
    llama: threadTimes(pids.llama),
    self: selfCpuNs(),
  };
  const t = await chat();
  // Thread by thread (overhead/cpu-time.ts `cpuSpent`): a thread that ended meanwhile took its
  // whole earlier time off a difference of sums.
  const core = cpuSpent(before.core, pids.core ? threadTimes(pids.core) : none);
  return {
    t,
    core: core.total,
    llama: cpuSpent(before.llama, threadTimes(pids.llama)).total,
    reader: selfCpuNs() - before.self,
    threads: core.byName,
  };
}

/** What a warm comparison streams: content (`llm_chunk`), or a thinking model's reasoning. */
interface Pieces {
  label: string;
  sse: "content" | "reasoning_content";
  event: "llm_chunk" | "llm_reasoning";
  extraArgs: string[];
}
const CONTENT: Pieces = { label: "warm chats", sse: "content", event: "llm_chunk", extraArgs: [] };
const REASONING: Pieces = {
  label: "warm chats, reasoning (chatml_think.jinja: the whole reply is thinking)",
  sse: "reasoning_content",
  event: "llm_reasoning",
  extraArgs: ["--chat-template-file", THINK_TEMPLATE],
};

/** The bare relay (overhead/relay.ts) against the direct server: the floor for CPU per piece. */
function spawnRelay(server: DirectServer, pieces: Pieces): CoreProcess {
  const script = join(import.meta.dir, "overhead", "relay.ts");
  const argv = [
    process.execPath,
    script,
    server.baseUrl,
    server.apiKey,
    SYSTEM,
    String(MAX_TOKENS),
    pieces.sse,
  ];
  return CoreProcess.spawnCommand(argv, work);
}

/** One warm comparison, set up: its three sides, what each measured so far, and its end. */
interface Comparison {
  pieces: Pieces;
  direct: Measured[];
  through: Measured[];
  relayed: Measured[];
  sides: (() => Promise<unknown>)[];
  /** Every process of this comparison: the direct server, the core and its llama-server, the relay. */
  pids: number[];
  close(): Promise<void>;
}

/** The direct server, a warmed-up core and the relay for one kind of piece. */
async function openComparison(pieces: Pieces): Promise<Comparison> {
  const { dir, config } = coreDir(`warm-${pieces.event}`, MAX_TOKENS, false, pieces.extraArgs);
  const argv = plannedArgv(config);
  const server = await DirectServer.start(target.server, argv);
  const proc = CoreProcess.spawn(core, dir, config);
  const relay = spawnRelay(server, pieces);
  const close = async () => {
    await Promise.race([relay.shutdown(), Bun.sleep(5_000)]);
    await Promise.race([proc.shutdown(), Bun.sleep(30_000)]);
    await server.stop();
  };
  try {
    await proc.request("initialize", { protocol_versions: [1] });
    const up = await proc.request("warmup");
    if (up.terminal.type !== "result") throw new Error(`warmup failed: ${JSON.stringify(up.terminal)}`);
  } catch (err) {
    await close();
    throw err;
  }
  const coreLlama = childPids(proc.pid)[0] ?? Number.NaN;
  // Unrecorded chats first: the first request after a load pays for things the others do not,
  // and the core's JIT keeps compiling for tens of chats (WARMUP_CHATS).
  await server.chat(MESSAGES, 32, pieces.sse);
  for (let i = 0; i < WARMUP_CHATS; i++) {
    await proc.request("chat", { input: INPUT }, pieces.event);
    await relay.request("chat", { input: INPUT }, pieces.event);
  }
  const c: Comparison = {
    pieces,
    direct: [],
    through: [],
    relayed: [],
    sides: [],
    pids: [server.pid, proc.pid, coreLlama, relay.pid],
    close,
  };
  c.sides = [
    async () =>
      c.direct.push(
        await measured({ llama: server.pid }, () => server.chat(MESSAGES, MAX_TOKENS, pieces.sse)),
      ),
    async () =>
      c.through.push(
        await measured({ core: proc.pid, llama: coreLlama }, async () => {
          const chat = await proc.request("chat", { input: INPUT }, pieces.event);
          const result = chat.terminal.result as
            | { trace_id?: string; usage?: { completion_tokens?: number } }
            | undefined;
          const step = result?.trace_id ? await proc.stepOf(result.trace_id, chat) : undefined;
          // A line may carry several tokens (docs/performance.md, "Joined pieces").
          const tokens = result?.usage?.completion_tokens;
          return { ...chat, promptMs: step?.promptMs, own: step?.own, tokens };
        }),
      ),
    async () =>
      c.relayed.push(
        await measured({ core: relay.pid, llama: server.pid }, () =>
          relay.request("chat", { input: INPUT }, pieces.event),
        ),
      ),
  ];
  return c;
}

/**
 * The warm comparisons asked for, run round by round in the same run: a round is each
 * comparison's three sides, each round starting with another side and, with both kinds, with
 * the other kind, so content and reasoning see the same noise and their CPU per piece can be
 * paired (the issue wants reasoning pieces to cost what content pieces cost).
 */
async function warm(parts: { pieces: Pieces; runs: number }[]): Promise<void> {
  const open: { c: Comparison; runs: number }[] = [];
  try {
    for (const p of parts) if (p.runs > 0) open.push({ c: await openComparison(p.pieces), runs: p.runs });
    const rounds = Math.max(0, ...open.map((o) => o.runs));
    const pids = () => open.flatMap((o) => o.c.pids).filter(Number.isFinite);
    const settled: number[] = [];
    for (let i = 0; i < rounds; i++)
      for (let j = 0; j < open.length; j++) {
        const o = open[(i + j) % open.length] as { c: Comparison; runs: number };
        if (i >= o.runs) continue;
        for (let k = 0; k < 3; k++) {
          settled.push(await settle(pids(), SETTLE));
          await (o.c.sides[(i + k) % 3] as () => Promise<unknown>)();
        }
      }
    if (SETTLE.quietMs > 0 && settled.length > 0)
      process.stdout.write(
        `\neach warm side began once the bench's processes had been quiet ${SETTLE.quietMs} ms ` +
          `(BENCH_SETTLE_MS; waited ${spread(settled, 1)} ms, at most ${SETTLE.maxMs})\n`,
      );
    else process.stdout.write("\nwarm sides back to back (BENCH_SETTLE_MS=0)\n");
    for (const { c, runs } of open) report(c.pieces, runs, c.direct, c.through, c.relayed);
    const [a, b] = open.map((o) => o.c);
    if (a && b) reportKinds(a, b);
  } finally {
    for (const { c } of open) await c.close();
  }
}

/** Reasoning against content, round by round: the core's CPU per piece and the relay's. */
function reportKinds(content: Comparison, reasoning: Comparison): void {
  const perPiece = (m: Measured) => m.core / tokensOf(m.t);
  const paired = (xs: Measured[], ys: Measured[]) =>
    ys.slice(0, xs.length).map((y, i) => perPiece(y) / perPiece(xs[i] as Measured));
  const core = paired(content.through, reasoning.through);
  process.stdout.write(
    `\nreasoning / content, CPU per token, paired by round (median (min–max)):\n` +
      `  core ${spread(core, 2)}; bare relay ${spread(paired(content.relayed, reasoning.relayed), 2)}; ` +
      `target the same, within 10% (≤ 1.1): ${verdict(median(core) <= 1.1)}\n`,
  );
}

function report(
  pieces: Pieces,
  runs: number,
  directM: Measured[],
  throughM: Measured[],
  relayM: Measured[],
): void {
  const direct = directM.map((m) => m.t);
  const through = throughM.map((m) => m.t);
  const ratio = through.map((c, i) => rate(c) / rate(direct[i] as StreamTiming));
  const extra = through.map((c, i) => ttft(c) - ttft(direct[i] as StreamTiming));
  const extraBeyond = through.map(
    (c, i) => ttftBeyondPrompt(c) - ttftBeyondPrompt(direct[i] as StreamTiming),
  );
  const cpuPerPiece = (m: Measured) => m.core / tokensOf(m.t);
  const cpuRatio = throughM.map((m, i) => cpuPerPiece(m) / cpuPerPiece(relayM[i] as Measured));
  const perPiece = (ms: Measured[], key: "core" | "llama" | "reader") =>
    spread(
      ms.map((m) => m[key] / 1000 / tokensOf(m.t)),
      1,
    );
  process.stdout.write(
    `\n${pieces.label}, ${runs} pairs, alternating, max_tokens ${MAX_TOKENS} (median (min–max)):\n` +
      `  pieces per reply: direct ${spread(
        direct.map((d) => d.pieces),
        0,
      )}, core ${spread(
        through.map((c) => c.pieces),
        0,
      )} (${pieces.event}, carrying ${spread(through.map(tokensOf), 0)} tokens)\n` +
      `  direct llama-server: first token ${spread(direct.map(ttft), 2)} ms, rate ${spread(direct.map(rate), 0)} characters/s\n` +
      `  through the core:    first token ${spread(through.map(ttft), 2)} ms, rate ${spread(through.map(rate), 0)} characters/s\n` +
      `  rate core/direct, paired: ${spread(ratio, 3)}; target ≥ 0.95: ${verdict(median(ratio) >= 0.95)}\n` +
      `  first token core − direct, paired: ${spread(extra, 2)} ms; target ≤ +2 ms: ${verdict(median(extra) <= 2)}\n` +
      `    95% interval of that median: ${medianInterval(extra)} ms\n` +
      ownLines(direct, through) +
      `    the same less each side's llama-server prompt_ms (its own noise taken out): ${spread(extraBeyond, 2)} ms; ` +
      `llama-server prompt_ms direct ${spread(
        direct.map((d) => d.promptMs ?? Number.NaN),
        2,
      )}, under the core ${spread(
        through.map((c) => c.promptMs ?? Number.NaN),
        2,
      )}\n` +
      `  CPU µs per token: core ${perPiece(throughM, "core")}; llama-server direct ${perPiece(directM, "llama")}, under the core ${perPiece(throughM, "llama")};\n` +
      `    this bench reading SSE ${perPiece(directM, "reader")}, reading the core's NDJSON ${perPiece(throughM, "reader")}\n` +
      `  CPU µs per token, bare relay (fetch, SSE split, JSON.parse, a line per piece): ${perPiece(relayM, "core")}\n` +
      `  core / relay CPU per token, paired: ${spread(cpuRatio, 2)}; target ≤ 1.3: ${verdict(median(cpuRatio) <= 1.3)}\n` +
      `  CPU µs per token by thread: core ${byThread(throughM)}\n    relay ${byThread(relayM)}\n`,
  );
}

/**
 * The first token split at the core's two times (its log's `at=`): what the core itself spends
 * on it, whatever llama-server's own time did (on a busy VM that varies by more than the whole
 * target), and llama-server's time from the request to the token on both sides.
 */
function ownLines(direct: StreamTiming[], through: StreamTiming[]): string {
  const own = through.map(ownPath);
  if (own.every(Number.isNaN)) return "";
  const server = through.map((c) => ttft(c) - ownPath(c));
  const paired = server.map((s, i) => s - ttft(direct[i] as StreamTiming));
  return (
    `    the core's own time on it (the line sent → the request written ${spread(
      through.map((c) => c.own?.before ?? Number.NaN),
      2,
    )}, the token read → its line here ${spread(
      through.map((c) => c.own?.after ?? Number.NaN),
      2,
    )}): ${spread(own, 2)} ms, 95% interval ${medianInterval(own)}; ≤ +2 ms: ${verdict(median(own) <= 2)}\n` +
    `    llama-server, the request → the first token: direct ${spread(direct.map(ttft), 2)} (fetch's own send included), ` +
    `under the core ${spread(server, 2)}; paired ${spread(paired, 2)} ms\n`
  );
}

/**
 * Each thread's CPU per piece, median over the replies, busiest first: where the core's cost
 * sits against the relay's (docs/performance.md, "Reasoning pieces against content pieces").
 */
function byThread(ms: Measured[]): string {
  const names = new Set(ms.flatMap((m) => [...m.threads.keys()]));
  const rows = [...names].map((name) => {
    const per = ms.map((m) => (m.threads.get(name) ?? 0) / 1000 / tokensOf(m.t));
    return { name, median: median(per) };
  });
  return rows
    .filter((r) => r.median >= 0.5)
    .sort((a, b) => b.median - a.median)
    .map((r) => `${r.name} ${r.median.toFixed(1)}`)
    .join(", ");
}

try {
  const argv = plannedArgv(coreDir("plan", MAX_TOKENS, false).config);
  process.stdout.write(
    `${target.smoke ? "stand-in" : "llama-server"} ${target.server}\nmodel ${target.model}\nplanned argv: ${argv.join(" ")}\n`,
  );
  if (COLD_RUNS > 0) await cold(argv);
  await warm([
    { pieces: CONTENT, runs: WARM_RUNS },
    { pieces: REASONING, runs: REASONING_RUNS },
  ]);
  if (target.smoke) process.stdout.write("\n(smoke run against the stand-in: not the target's numbers)\n");
} finally {
  rmSync(work, { recursive: true, force: true });
}
