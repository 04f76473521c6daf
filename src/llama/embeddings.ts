import { embedMaxInputs } from "../protocol/embed.ts";
import { inputTokens, requestSize } from "./embed-budget.ts";
import { EmbedError } from "./embed-error.ts";
import { errorBody, errorText, LlmError, notJson, statusError } from "./errors.ts";
import { answerText, call, type LlamaEndpoint } from "./http.ts";
import { wellFormedJson } from "./well-formed.ts";

/**
 * POST /v1/embeddings (recordings 112–116): a vector per input, in the inputs' order, as
 * llama-server gives them (L2-normalized by its pooling). Long lists go in requests of at most
 * `perRequest` inputs and of bounded work (embed-budget.ts), each under its own watch (its
 * deadline); the vectors come back as base64 float32 (112b), a quarter of the JSON. A list
 * longer than one answer carries at the model's width (`embedMaxInputs`) is refused `too_many`.
 */

/** One request's work, as its watch sees it: its inputs (how many, and which) and their estimated tokens. */
export interface RequestWork {
  inputs: number;
  tokens: number;
  /** The texts it sends: those in flight should the server die meanwhile (server/embed-suspects.ts). */
  texts: readonly string[];
}

export interface EmbedOptions {
  signal?: AbortSignal;
  /** Inputs per request at most (default 1024, half the method's limit): llama-server batches them itself, as fast as one request of all. */
  perRequest?: number;
  /** Echoed back by llama-server as the answer's `model` (112); it serves one model. */
  model?: string;
  /** The slot's context: no input has more tokens (caps each one's estimate). */
  maxInputTokens?: number;
  /**
   * Watches one request (its deadline): the signal it is sent and read with, aborted with the
   * error to throw; disposed once its answer is read. Without it, `signal` alone.
   */
  watch?: (work: RequestWork) => { signal: AbortSignal; dispose(): void };
}

export interface Embedded {
  embeddings: number[][];
  /** The tokens of every input together (`usage.prompt_tokens`). */
  promptTokens: number;
}

const PER_REQUEST = 1024;
/**
 * A list longer than this sends its first input alone, to learn the width before the rest is
 * embedded for nothing (64 vectors fit an answer at any width under 18,000).
 */
const ALONE_FIRST_OVER = 64;

/** Embeds `inputs` in order; an empty list is refused before any request. */
export async function embed(
  server: LlamaEndpoint,
  inputs: readonly string[],
  o: EmbedOptions = {},
): Promise<Embedded> {
  if (inputs.length === 0)
    throw new EmbedError("empty_input", "there is nothing to embed: the input list is empty");
  const size = Math.max(1, Math.floor(o.perRequest ?? PER_REQUEST));
  const out: Embedded = { embeddings: [], promptTokens: 0 };
  const tokens = inputs.map((t) => inputTokens(t, o.maxInputTokens));
  for (let at = 0; at < inputs.length; ) {
    const n = at === 0 && inputs.length > ALONE_FIRST_OVER ? 1 : requestSize(tokens, at, size);
    const texts = inputs.slice(at, at + n);
    const work = { inputs: n, tokens: tokens.slice(at, at + n).reduce((a, b) => a + b, 0), texts };
    const part = await batch(server, texts, at, work, o);
    // One width for the whole answer: `embed` gives one `dimensions` for every vector.
    const width = out.embeddings[0]?.length;
    if (width !== undefined && part.embeddings[0]?.length !== width)
      throw new LlmError(
        "bad_response",
        `llama-server's /v1/embeddings answer has vectors of ${part.embeddings[0]?.length} numbers after ${width}`,
      );
    if (at === 0) fitsOneAnswer(inputs.length, part.embeddings[0]?.length ?? 0);
    out.embeddings.push(...part.embeddings);
    out.promptTokens += part.promptTokens;
    at += n;
  }
  return out;
}

/** Refuses a list whose vectors no answer line holds (docs/protocol.md#embed). */
function fitsOneAnswer(count: number, width: number): void {
  const most = embedMaxInputs(width);
  if (count > most)
    throw new EmbedError(
      "too_many",
      `${count} strings of ${width} dimensions make an answer longer than a client reads: send at most ${most} at a time`,
      { max_inputs: most, dimensions: width },
    );
}

/**
 * One request. An input too long for the server fails the whole request without saying which
 * (114), so a batch that fails so is sent again one input at a time, to name it.
 */
async function batch(
  server: LlamaEndpoint,
  inputs: readonly string[],
  offset: number,
  work: RequestWork,
  o: EmbedOptions,
): Promise<Embedded> {
  const body = wellFormedJson({
    input: inputs,
    encoding_format: "base64",
    ...(o.model ? { model: o.model } : {}),
  });
  const watch = o.watch?.(work);
  const signal = watch?.signal ?? o.signal;
  let res: Response;
  let text: string;
  try {
    res = await call(server, "/v1/embeddings", { body, signal });
    text = res.ok ? await answerText(res, "/v1/embeddings", signal) : await errorText(res, signal);
  } finally {
    watch?.dispose();
  }
  if (res.ok) return parseAnswer(text, inputs.length, offset);
  const tooLong = tokensOver(text);
  if (tooLong && inputs.length === 1)
    throw new EmbedError(
      "too_long",
      `input ${offset} has ${tooLong.n_tokens} tokens, more than the embedding model takes at once (${tooLong.max_tokens})`,
      { index: offset, ...tooLong },
    );
  if (tooLong) return embed(server, inputs, { ...o, perRequest: 1 }).catch((err) => reindexed(err, offset));
  if (res.status === 501)
    throw new EmbedError(
      "not_supported",
      "this llama-server was not started with --embeddings: it serves no embeddings",
    );
  throw statusError(res.status, res.statusText, text);
}

/** A failure of a batch sent one by one names the input by its place in the caller's list. */
function reindexed(err: unknown, offset: number): never {
  if (err instanceof EmbedError && err.data.index !== undefined) {
    const index = err.data.index + offset;
    throw new EmbedError(err.kind, err.message.replace(/^input \d+/, `input ${index}`), {
      ...err.data,
      index,
    });
  }
  throw err;
}

/**
 * The token counts of llama-server's "too long" answers (114): a 500 past the physical batch,
 * a 400 `exceed_context_size_error` past the slot's context.
 */
function tokensOver(text: string): { n_tokens: number; max_tokens: number } | undefined {
  const message = errorBody(text)?.message ?? "";
  const batch = /input \((\d+) tokens\) is too large to process.*current batch size: (\d+)/.exec(message);
  const context = /input \((\d+) tokens\) is larger than the max context size \((\d+) tokens\)/.exec(message);
  const m = batch ?? context;
  return m ? { n_tokens: Number(m[1]), max_tokens: Number(m[2]) } : undefined;
}

/**
 * `{data: [{index, embedding}], usage}`: each input's vector in its place, base64 or numbers.
 * A vector holding NaN or an infinity (base64 float32 can carry them; JSON numbers cannot) is
 * `not_finite`, naming its input: on the wire it would be `null`, and in memory's index a score
 * that sorts nowhere (docs/protocol.md#embed).
 */
function parseAnswer(text: string, count: number, offset: number): Embedded {
  let body: { data?: unknown; usage?: { prompt_tokens?: unknown } };
  try {
    body = JSON.parse(text);
  } catch {
    throw notJson("an answer to /v1/embeddings", text);
  }
  const bad = (why: string) => new LlmError("bad_response", `llama-server's /v1/embeddings answer ${why}`);
  if (!Array.isArray(body?.data) || body.data.length !== count)
    throw bad(`has ${Array.isArray(body?.data) ? body.data.length : "no"} vectors for ${count} inputs`);
  const embeddings: number[][] = new Array(count);
  let width: number | undefined;
  for (const item of body.data as { index?: unknown; embedding?: unknown }[]) {
    const i = item?.index;
    if (typeof i !== "number" || !Number.isInteger(i) || i < 0 || i >= count || embeddings[i])
      throw bad("has a vector with no place of its own");
    const vector = vectorOf(item.embedding) ?? [];
    width ??= vector.length;
    if (vector.length === 0 || vector.length !== width)
      throw bad("has a vector that is not a list of numbers of the model's width");
    if (!vector.every(Number.isFinite))
      throw new EmbedError(
        "not_finite",
        `input ${offset + i} came back from the embedding model as a vector holding NaN or infinity: the model cannot embed it`,
        { index: offset + i },
      );
    embeddings[i] = vector;
  }
  // A count the result can carry (a whole number, never negative), else none.
  const tokens = body.usage?.prompt_tokens;
  return {
    embeddings,
    promptTokens: Number.isSafeInteger(tokens) && (tokens as number) >= 0 ? (tokens as number) : 0,
  };
}

/** A byte that is not of base64's alphabet (its padding aside). */
const NOT_BASE64 = /[^A-Za-z0-9+/]/;

/**
 * Standard base64, padded, as llama-server writes it (112b). One search for a stray byte: a
 * pattern of the whole form took 0.4 µs a character in JSC, 10 ms a vector of 8192 floats.
 */
function isBase64(v: string): boolean {
  const pad = v.endsWith("==") ? 2 : v.endsWith("=") ? 1 : 0;
  return v.length % 4 === 0 && !NOT_BASE64.test(pad ? v.slice(0, -pad) : v);
}

/** An `embedding` as numbers: base64 is little-endian float32 (112b). */
function vectorOf(value: unknown): number[] | undefined {
  if (typeof value === "string") {
    // Buffer skips what is not base64: text in a vector's place would decode to garbage numbers.
    if (!isBase64(value)) return undefined;
    const bytes = Buffer.from(value, "base64");
    if (bytes.length % 4 !== 0) return undefined;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    return Array.from({ length: bytes.length / 4 }, (_, k) => view.getFloat32(k * 4, true));
  }
  if (Array.isArray(value) && value.every((x) => typeof x === "number")) return value as number[];
  return undefined;
}
