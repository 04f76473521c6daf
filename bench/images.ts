#!/usr/bin/env bun
/**
 * Images (issue 30, docs/protocol.md#images) against a real llama-server and a vision pair
 * (default: the shared tiny-vision.gguf with tiny-vision-mmproj.gguf, a fixed 64 tokens an image):
 *
 *   first token  a chat with one image through the compiled core (validation, storage,
 *                encoding included), request → first token on the host's clock, against
 *                llama-server called directly with the same data URL, alternating, each round a
 *                new image so neither side's cache holds it          target: core ≤ direct + 40 ms
 *   turn 2       the share of the second turn's prompt that llama-server processed after a
 *                first turn with an image (its image is not encoded again)      target ≤ 0.2
 *   memory       the core's resident memory while a 20 MB image (by path) goes through a turn,
 *                above what it held before, at the peak and 2 s after   target ≤ 3× and ≈ 0
 *
 *   LOCAL_AI_BENCH_LLAMA_SERVER=/path/llama-server [LOCAL_AI_BENCH_VISION_DIR=/path/models] \
 *     ./node_modules/.bin/bun bench/images.ts [rounds]
 * (LOCAL_AI_TEST_LLAMA_SERVER works too.) Numbers are printed, never asserted.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pickFreePort } from "../src/runtime/ports.ts";
import { spawnCore } from "../test/fixtures/core-process.ts";
import { png, pngChunk } from "../test/fixtures/images.ts";

const SERVER = process.env.LOCAL_AI_BENCH_LLAMA_SERVER ?? process.env.LOCAL_AI_TEST_LLAMA_SERVER;
if (!SERVER) {
  console.log("bench/images.ts needs a real llama-server: set LOCAL_AI_BENCH_LLAMA_SERVER");
  process.exit(0);
}
const MODELS = process.env.LOCAL_AI_BENCH_VISION_DIR ?? join(import.meta.dir, "..", "..", "shared", "models");
const MODEL = join(MODELS, "tiny-vision.gguf");
const MMPROJ = join(MODELS, "tiny-vision-mmproj.gguf");
const ROUNDS = Number(process.argv[2] ?? 10);
const work = mkdtempSync(join(tmpdir(), "bench-images-"));
type Core = ReturnType<typeof spawnCore>;

/** A 256×256 PNG of one colour from `seed`: a real decode for llama-server, a new image each round. */
function roundPng(seed: number, side = 256): Buffer {
  return png(side, side, { seed: seed & 0xff });
}

/** A PNG of about `bytes` (noise does not compress): what a phone photo weighs. */
function largePng(bytes: number): Buffer {
  const side = Math.floor(Math.sqrt(bytes / 3.01));
  // png()'s header for the size, then rows of noise stored (deflate level 0), so it weighs its pixels.
  const base = png(side, 1, { declare: { width: side, height: side } });
  const { deflateSync } = require("node:zlib") as typeof import("node:zlib");
  const raw = Buffer.alloc((side * 3 + 1) * side);
  let x = 12345;
  for (let i = 0; i < raw.length; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    raw[i] = i % (side * 3 + 1) === 0 ? 0 : x >> 16;
  }
  const idat = deflateSync(raw, { level: 0 });
  const ihdrEnd = 8 + 25;
  return Buffer.concat([
    base.subarray(0, ihdrEnd),
    pngChunk("IDAT", idat),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

function config(dir: string): void {
  writeFileSync(
    join(dir, "config.yaml"),
    [
      "app: { data_dir: ./data }",
      `llama: { binary: ${JSON.stringify(SERVER)}, parallel: 1, extra_args: ["--mmproj", ${JSON.stringify(MMPROJ)}] }`,
      `model: { path: ${JSON.stringify(MODEL)}, context: 4096, max_tokens: 4 }`,
      "agents: [{ name: assistant, system_prompt: You describe images., tools: [] }]",
      "memory: { enabled: false }",
    ].join("\n"),
  );
}

let nextId = 0;
/** A chat through the core: ms from sending to its first token (or its end), and its usage. */
async function coreChat(core: Core, params: Record<string, unknown>) {
  const id = ++nextId;
  const sent = performance.now();
  let first = 0;
  const watch = core
    .waitFor((ms) => ms.some((m) => m.id === id && (m.event === "llm_chunk" || m.type !== "event")), 300_000)
    .then(() => {
      first = performance.now() - sent;
    });
  const r = await core.request({ id, method: "chat", params }, 300_000);
  await watch;
  if (r.type !== "result") throw new Error(`chat failed: ${JSON.stringify(r).slice(0, 500)}`);
  return { first, usage: r.result.usage as Record<string, number> };
}

/** The same request straight to a llama-server of the same flags: ms to its first content token. */
async function directChat(base: string, image: Buffer): Promise<number> {
  const body = JSON.stringify({
    messages: [
      { role: "system", content: "You describe images." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is in this image?" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${image.toString("base64")}` } },
        ],
      },
    ],
    max_tokens: 4,
    stream: true,
  });
  const sent = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    body,
    headers: { "Content-Type": "application/json" },
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  let first = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (first === 0 && /"content":"/.test(text)) first = performance.now() - sent;
  }
  return first || performance.now() - sent;
}

function rssKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

/** A llama-server of the core's flags for the same model and projector, ready. */
async function startDirect(): Promise<{ proc: ReturnType<typeof Bun.spawn>; base: string }> {
  const port = await pickFreePort();
  const proc = Bun.spawn(
    [
      SERVER as string,
      "-m",
      MODEL,
      "--mmproj",
      MMPROJ,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "-c",
      "4096",
      "-np",
      "1",
    ],
    { stdout: "ignore", stderr: "ignore" },
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if ((await fetch(`${base}/health`).catch(() => undefined))?.ok) break;
    await Bun.sleep(100);
  }
  return { proc, base };
}

async function main(): Promise<void> {
  config(work);
  // The direct llama-server, started again should it go away (on a machine shared with
  // other test runs, a llama-server is sometimes stopped by someone else's cleanup).
  let direct = await startDirect();
  const directChatSafe = async (image: Buffer): Promise<number> => {
    try {
      return await directChat(direct.base, image);
    } catch (err) {
      console.log(`(the direct llama-server went away: ${(err as Error).message}; started again)`);
      direct.proc.kill();
      direct = await startDirect();
      await directChat(direct.base, roundPng(998));
      return await directChat(direct.base, image);
    }
  };
  const core = spawnCore({ cwd: work });
  try {
    // Both warm: a first chat each.
    await coreChat(core, { session_id: "warm", input: "hello" });
    await directChatSafe(roundPng(999));

    const coreMs: number[] = [];
    const directMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const image = roundPng(round * 7 + 1);
      const path = join(work, `round-${round}.png`);
      writeFileSync(path, image);
      const viaCore = () =>
        coreChat(core, { session_id: `r${round}`, input: "What is in this image?", images: [{ path }] }).then(
          (r) => coreMs.push(r.first),
        );
      const viaDirect = () => directChatSafe(image).then((ms) => directMs.push(ms));
      if (round % 2 === 0) {
        await viaCore();
        await viaDirect();
      } else {
        await viaDirect();
        await viaCore();
      }
    }
    const c = median(coreMs);
    const d = median(directMs);
    console.log(`first token with one 256×256 image (median of ${ROUNDS}, alternating):`);
    console.log(
      `  core ${c.toFixed(1)} ms   direct ${d.toFixed(1)} ms   core − direct ${(c - d).toFixed(1)} ms (target ≤ 40)`,
    );

    const path = join(work, "turn2.png");
    writeFileSync(path, roundPng(4242));
    await coreChat(core, {
      session_id: "two",
      input: "Describe this picture in detail, please.",
      images: [{ path }],
    });
    const second = await coreChat(core, { session_id: "two", input: "And what colour is it?" });
    const u = second.usage;
    const share = ((u.prompt_tokens ?? 0) - (u.cached_tokens ?? 0)) / (u.prompt_tokens ?? Number.NaN);
    console.log(
      `turn 2 after an image: processed ${(u.prompt_tokens ?? 0) - (u.cached_tokens ?? 0)} of ${u.prompt_tokens} prompt tokens = ${share.toFixed(3)} (target ≤ 0.2); image_tokens ${u.image_tokens}`,
    );

    const big = largePng(20 * 1024 * 1024 - 64 * 1024);
    const bigPath = join(work, "big.png");
    writeFileSync(bigPath, big);
    const pid = core.proc.pid;
    await Bun.sleep(2000);
    const before = rssKb(pid, "VmRSS");
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, rssKb(pid, "VmRSS"));
        await Bun.sleep(2);
      }
    })();
    const r = await coreChat(core, {
      session_id: "big",
      input: "What is this?",
      images: [{ path: bigPath }],
    });
    sampling = false;
    await sampler;
    await Bun.sleep(2000);
    const after = rssKb(pid, "VmRSS");
    const mb = (kb: number) => (kb / 1024).toFixed(1);
    console.log(
      `a ${(big.length / 1048576).toFixed(1)} MB image by path: core RSS ${mb(before)} MB before, peak +${mb(peak - before)} MB (${((peak - before) / (big.length / 1024)).toFixed(2)}× the image; target ≤ 3×), +${mb(after - before)} MB 2 s after; image_tokens ${r.usage.image_tokens}`,
    );
    await core.request({ id: ++nextId, method: "shutdown" }, 60_000);
    await core.exited(60_000);
  } finally {
    direct.proc.kill();
    await direct.proc.exited;
    if (!process.env.LOCAL_AI_BENCH_KEEP) rmSync(work, { recursive: true, force: true });
  }
}

await main();
