import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { gguf } from "@huggingface/gguf";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { denseModel, F16, type GgufValue, writeGguf } from "../../test/fixtures/gguf-writer.ts";

/** A llama's shape: hidden size, layers, feed-forward size (heads of 64 dimensions). */
export interface TimingShape {
  embd: number;
  layers: number;
  ff: number;
}

/**
 * A model big enough to time (bench/reuse.ts, bench/models.ts): a llama of hidden size 512 and
 * 16 layers (or `shape`) with random F16 weights, written by the project's own GGUF writer, with
 * the tokenizer and chat template of `tokenizerFrom` (a real tiny model: LOCAL_AI_BENCH_MODEL) so
 * llama-server takes it as it is.
 */
export async function writeTimingModel(
  dir: string,
  tokenizerFrom: string,
  shape: TimingShape = { embd: 512, layers: 16, ff: 1408 },
): Promise<string> {
  const { metadata: m } = await gguf(tokenizerFrom, { allowLocalFile: true });
  const get = (k: string) => (m as Record<string, unknown>)[k];
  const tokens = get("tokenizer.ggml.tokens") as string[];
  const extra: Record<string, GgufValue> = {
    "llama.rope.dimension_count": { type: "u32", value: 64 },
    "llama.vocab_size": { type: "u32", value: tokens.length },
    "general.file_type": { type: "u32", value: 1 },
    "tokenizer.ggml.model": { type: "str", value: String(get("tokenizer.ggml.model")) },
    "tokenizer.ggml.pre": { type: "str", value: String(get("tokenizer.ggml.pre") ?? "default") },
    "tokenizer.ggml.tokens": { type: "arr_str", value: tokens },
    "tokenizer.ggml.scores": { type: "arr_f32", value: get("tokenizer.ggml.scores") as number[] },
    "tokenizer.ggml.token_type": { type: "arr_i32", value: get("tokenizer.ggml.token_type") as number[] },
    "tokenizer.ggml.bos_token_id": { type: "u32", value: Number(get("tokenizer.ggml.bos_token_id")) },
    "tokenizer.ggml.eos_token_id": { type: "u32", value: Number(get("tokenizer.ggml.eos_token_id")) },
    "tokenizer.ggml.unknown_token_id": { type: "u32", value: Number(get("tokenizer.ggml.unknown_token_id")) },
    "tokenizer.ggml.add_bos_token": { type: "bool", value: get("tokenizer.ggml.add_bos_token") === true },
    "tokenizer.ggml.add_eos_token": { type: "bool", value: get("tokenizer.ggml.add_eos_token") === true },
    "tokenizer.chat_template": { type: "str", value: String(get("tokenizer.chat_template")) },
  };
  const spec = denseModel({
    arch: "llama",
    layers: shape.layers,
    embd: shape.embd,
    heads: shape.embd / 64,
    kvHeads: shape.embd / 64,
    ff: shape.ff,
    vocab: tokens.length,
    ctx: 8192,
    type: F16,
    extra,
  });
  mkdirSync(dir, { recursive: true });
  return writeGguf(dir, `timing-${shape.embd}x${shape.layers}.gguf`, { ...spec, fill: "random" });
}

export interface SlotFileCost {
  tokens: number;
  prefillMs: number;
  saveMs: number;
  restoreMs: number;
  bytes: number;
}

/**
 * What a slot file costs on `model`, straight from llama-server's own timings: a prompt of N
 * tokens processed (`timings.prompt_ms`), the slot saved (`save_ms`, `n_written`), erased, and
 * restored (`restore_ms`).
 */
export async function slotFileCosts(server: string, model: string, work: string): Promise<SlotFileCost[]> {
  const slots = join(work, "slot-costs");
  mkdirSync(slots, { recursive: true });
  const port = await pickFreePort();
  const proc = Bun.spawn(
    [server, "-m", model, "-c", "8192", "-np", "1", "--slot-save-path", slots, "--port", String(port)],
    { stdout: "ignore", stderr: "ignore" },
  );
  const base = `http://127.0.0.1:${port}`;
  const post = async (path: string, body: unknown) =>
    (await (await fetch(`${base}${path}`, { method: "POST", body: JSON.stringify(body) })).json()) as Record<
      string,
      any
    >;
  try {
    for (let i = 0; i < 600; i++) {
      const ok = await fetch(`${base}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await Bun.sleep(100);
    }
    const out: SlotFileCost[] = [];
    for (const n of [1000, 2000, 4000]) {
      await post("/slots/0?action=erase", {});
      const prompt = Array.from({ length: n }, (_, i) => 100 + ((i * 7919) % 30000));
      const done = await post("/completion", { prompt, n_predict: 1, cache_prompt: true });
      const saved = await post("/slots/0?action=save", { filename: `cost-${n}.bin` });
      await post("/slots/0?action=erase", {});
      const restored = await post("/slots/0?action=restore", { filename: `cost-${n}.bin` });
      out.push({
        tokens: saved.n_saved,
        prefillMs: done.timings.prompt_ms,
        saveMs: saved.timings.save_ms,
        restoreMs: restored.timings.restore_ms,
        bytes: saved.n_written,
      });
    }
    return out;
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
  }
}
