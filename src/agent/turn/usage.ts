import type { CompletionResult } from "../../llama/stream-reply.ts";
import type { Usage } from "../../protocol/usage.ts";

/**
 * What a turn cost (docs/agent.md#prompt-reuse), summed over its steps from llama-server's own
 * counters: its `usage` (OpenAI's names) and `timings` (`cache_n` is the prompt taken from the
 * slot's cache, `prompt_n` what it processed, test/fixtures/llama-server/transcripts/92). Counts
 * and times add up; `ttft_ms` is the first step's (the host's wait for the first token),
 * `tokens_per_s` the generation's rate over all steps. A field no step reported stays out.
 */
export class TurnUsage {
  private readonly sums = new Map<keyof Usage, number>();
  private predictedMs = 0;
  private predictedN = 0;
  private ttft: number | undefined;
  private steps = 0;

  add(reply: Pick<CompletionResult, "usage" | "timings" | "ttftMs">): void {
    const u = reply.usage ?? {};
    const t = reply.timings ?? {};
    const cached = count(t.cache_n) ?? count(details(u.prompt_tokens_details).cached_tokens);
    const prompt = count(u.prompt_tokens) ?? sum(count(t.cache_n), count(t.prompt_n));
    this.plus("prompt_tokens", prompt);
    this.plus("cached_tokens", cached);
    this.plus("completion_tokens", count(u.completion_tokens) ?? count(t.predicted_n));
    this.plus("reasoning_tokens", count(details(u.completion_tokens_details).reasoning_tokens));
    this.plus("prompt_ms", num(t.prompt_ms));
    const n = count(t.predicted_n);
    const ms = num(t.predicted_ms);
    if (n !== undefined && ms !== undefined) {
      this.predictedN += n;
      this.predictedMs += ms;
    }
    if (this.steps === 0) this.ttft = num(reply.ttftMs);
    this.steps++;
  }

  /** A step's images cost this many prompt tokens (docs/protocol.md#images). */
  addImageTokens(n: number): void {
    this.plus("image_tokens", n);
  }

  total(): Usage {
    const out: Usage = Object.fromEntries(this.sums);
    if (this.ttft !== undefined) out.ttft_ms = round(this.ttft);
    if (this.predictedMs > 0) out.tokens_per_s = round((this.predictedN * 1000) / this.predictedMs);
    if (out.prompt_ms !== undefined) out.prompt_ms = round(out.prompt_ms);
    // A rate over a denormal time is infinite, and JSON writes that as null, which no field of
    // the protocol's usage allows: such a field stays out, as one no step reported.
    for (const [key, value] of Object.entries(out))
      if (!Number.isFinite(value)) delete out[key as keyof Usage];
    return out;
  }

  private plus(key: keyof Usage, value: number | undefined): void {
    if (value !== undefined) this.sums.set(key, (this.sums.get(key) ?? 0) + value);
  }
}

/**
 * A time as llama-server reports it, or undefined for what no server measures: negative, not a
 * number, or past 2^53 (1e308 ms summed or scaled by 100 to round is infinite, written as null).
 */
const num = (v: unknown): number | undefined =>
  typeof v === "number" && v >= 0 && v <= Number.MAX_SAFE_INTEGER ? v : undefined;
/** A token count: a whole number within a double's exact integers, else undefined. */
const count = (v: unknown): number | undefined =>
  Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : undefined;
const details = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {};
const sum = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? undefined : a + b;
const round = (n: number) => Math.round(n * 100) / 100;
