import { afterEach, describe, expect, test } from "bun:test";
import { CLIENT_DEFAULTS } from "../../src/client/client-options.ts";
import {
  DEADLINE_CAP,
  FLOOR_TOKENS_PER_S,
  inputTokens,
  REQUEST_TOKENS,
  requestDeadlineMs,
  UNKNOWN_CONTEXT_TOKENS,
} from "../../src/llama/embed-budget.ts";
import { EmbedError } from "../../src/llama/embed-error.ts";
import { embed } from "../../src/llama/embeddings.ts";
import { LlmError } from "../../src/llama/errors.ts";
import { EMBED_MAX_ANSWER_BYTES, embedMaxInputs } from "../../src/protocol/embed.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readExchanges, readTranscript } from "../contract/transcript.ts";
import { type EmbeddingServer, TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { tape } from "./tape.ts";

// The embeddings client against the stand-in serving as tiny-embed.gguf does (111b, 119) and
// against the recorded answers played back verbatim (tape.ts), each test naming its recording.

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );
const words = (n: number) => Array.from({ length: n }, () => "word").join(" ");

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});
const serve = (embedding?: EmbeddingServer) => {
  standIn = new LlamaStandIn({ nCtx: 512, ...(embedding ? { embedding } : {}) });
  return standIn;
};

describe("embed against the stand-in", () => {
  test("a list comes back in order whatever the batch size, the same vector for the same text (transcript 112)", async () => {
    const s = serve(TINY_EMBED);
    const inputs = ["hello world", "the cat sat on the paper", "", "hello world", "a b c"];
    const whole = await embed(s, inputs);
    expect(whole.embeddings).toHaveLength(5);
    expect(whole.embeddings.every((v) => v.length === 64)).toBe(true);
    expect(whole.embeddings[3]).toEqual(whole.embeddings[0]!);
    expect(whole.embeddings[1]).not.toEqual(whole.embeddings[0]!);
    // [CLS] and [SEP] around each: 4 + 8 + 2 + 4 + 5.
    expect(whole.promptTokens).toBe(23);
    const batched = await embed(s, inputs, { perRequest: 2 });
    expect(batched).toEqual(whole);
    const alone = await embed(s, ["the cat sat on the paper"]);
    expect(alone.embeddings[0]).toEqual(whole.embeddings[1]!);
  });

  test("the base64 answer decodes to the float vector it stands for (transcripts 112b, 112c)", async () => {
    const s = serve(TINY_EMBED);
    const res = await fetch(`${s.baseUrl}/v1/embeddings`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.apiKey}` },
      body: JSON.stringify({ input: "hello world" }),
    });
    const floats = ((await res.json()) as { data: { embedding: number[] }[] }).data[0]!.embedding;
    const [vector] = (await embed(s, ["hello world"])).embeddings;
    expect(vector).toEqual(floats.map((x) => Math.fround(x)));
  });

  test("an input past the batch is too_long naming its index and counts, in any batch (transcript 114)", async () => {
    const s = serve(TINY_EMBED);
    const inputs = ["a", "b", "c", words(600), "d"];
    for (const perRequest of [1, 2, 5]) {
      const err = await failure(embed(s, inputs, { perRequest }));
      expect(err).toBeInstanceOf(EmbedError);
      expect(err).toMatchObject({ kind: "too_long", data: { index: 3, n_tokens: 602, max_tokens: 512 } });
      expect((err as Error).message).toContain("input 3 ");
    }
    // 510 words are 512 tokens: exactly the batch, embedded.
    expect((await embed(s, [words(510)])).promptTokens).toBe(512);
  });

  test("a list whose answer no client line holds at the model's width is too_many, after one input alone; the most allowed fits", async () => {
    // Recording 111b: the vectors are n_embd wide; here 1,024, as bge-large's or e5-large's.
    const s = serve({ ...TINY_EMBED, nEmbd: 1024 });
    const most = embedMaxInputs(1024);
    const inputs = Array.from({ length: most + 1 }, (_, i) => `text number ${i}`);
    const err = await failure(embed(s, inputs));
    expect(err).toBeInstanceOf(EmbedError);
    expect(err).toMatchObject({ kind: "too_many", data: { max_inputs: most, dimensions: 1024 } });
    const fits = await embed(s, inputs.slice(0, most));
    expect(fits.embeddings).toHaveLength(most);
    expect(JSON.stringify(fits.embeddings).length).toBeLessThan(EMBED_MAX_ANSWER_BYTES);
    // With room for the rest of the answer under the line the typed client reads.
    expect(EMBED_MAX_ANSWER_BYTES + 1024 * 1024).toBeLessThanOrEqual(CLIENT_DEFAULTS.maxLineBytes);
    // The width is learned from the first input alone: nothing more is embedded for a refusal.
    const vector = Buffer.from(new Float32Array(1024).fill(0.03125).buffer).toString("base64");
    using t = tape({
      status: 200,
      headers: {},
      body: JSON.stringify({ data: [{ index: 0, embedding: vector }] }),
    });
    expect(await failure(embed(t, inputs))).toMatchObject({ kind: "too_many" });
    expect(t.asked.map((a) => JSON.parse(a.body).input)).toEqual([["text number 0"]]);
  });

  test("a server without --embeddings is not_supported (transcript 110)", async () => {
    const s = serve();
    expect(await failure(embed(s, ["hello world"]))).toMatchObject({ kind: "not_supported" });
  });

  test("--pooling none is the request's fault, a bad_response, not a broken server (transcript 117)", async () => {
    const s = serve({ ...TINY_EMBED, pooling: "none" });
    const err = await failure(embed(s, ["hello world"]));
    expect(err).toBeInstanceOf(LlmError);
    expect(err).toMatchObject({ kind: "bad_response", status: 400 });
  });
});

describe("embed against the recorded answers", () => {
  test("an empty list is refused before any request: llama-server's own answer is a 500 (transcript 115)", async () => {
    const [, emptyList] = readExchanges(RECORDINGS, "115-embed-empty-string.txt");
    using t = tape(emptyList!);
    expect(await failure(embed(t, []))).toMatchObject({ kind: "empty_input" });
    expect(t.asked).toHaveLength(0);
  });

  test("the recorded 500 past the batch and 400 past the positions are both too_long with their counts (transcript 114)", async () => {
    const [, batch, , context] = readExchanges(RECORDINGS, "114-embed-input-longer-than-context.txt");
    using past = tape(batch!);
    expect(await failure(embed(past, [words(600)]))).toMatchObject({
      kind: "too_long",
      data: { index: 0, n_tokens: 602, max_tokens: 512 },
    });
    using capped = tape(context!);
    expect(await failure(embed(capped, [words(600)]))).toMatchObject({
      kind: "too_long",
      data: { index: 0, n_tokens: 602, max_tokens: 512 },
    });
  });

  test("the recorded 501 is not_supported (transcript 110)", async () => {
    using t = tape(readTranscript(RECORDINGS, "110-vision-server-embeddings-without-flag.txt"));
    expect(await failure(embed(t, ["hello world"]))).toMatchObject({ kind: "not_supported" });
  });

  test("batches ask for base64 with the inputs in order; the recorded base64 is the recorded float vector (transcripts 112, 112b, 112c)", async () => {
    const list = readTranscript(RECORDINGS, "112-embed-v1-embeddings-list.txt");
    using t = tape(list);
    const got = await embed(t, ["a", "b", "c", "d"], { perRequest: 2 });
    expect(t.asked.map((a) => JSON.parse(a.body))).toEqual([
      { input: ["a", "b"], encoding_format: "base64" },
      { input: ["c", "d"], encoding_format: "base64" },
    ]);
    const recordedVectors = JSON.parse(list.body).data.map((d: { embedding: number[] }) => d.embedding);
    expect(got.embeddings).toEqual([...recordedVectors, ...recordedVectors]);
    expect(got.promptTokens).toBe(2 * JSON.parse(list.body).usage.prompt_tokens);

    using b64 = tape(readTranscript(RECORDINGS, "112b-embed-v1-embeddings-base64.txt"));
    const floats = JSON.parse(readTranscript(RECORDINGS, "112c-embed-v1-embeddings-string.txt").body).data[0]
      .embedding as number[];
    expect((await embed(b64, ["hello world"])).embeddings[0]).toEqual(floats.map((x) => Math.fround(x)));
  });

  test("an answer with fewer vectors than inputs is a bad_response (transcript 112c for two inputs)", async () => {
    using t = tape(readTranscript(RECORDINGS, "112c-embed-v1-embeddings-string.txt"));
    expect(await failure(embed(t, ["a", "b"]))).toMatchObject({ kind: "bad_response" });
  });

  // A model's arithmetic gone wrong (a fp16 overflow) gives NaN or infinity; base64 float32 carries
  // them where JSON numbers cannot, and `embed`'s result would show them as null.
  test("a vector holding NaN or infinity is not_finite, naming its input in any batch", async () => {
    const b64 = (xs: number[]) => Buffer.from(new Float32Array(xs).buffer).toString("base64");
    const answer = (vectors: number[][]) => ({
      status: 200,
      headers: {},
      body: JSON.stringify({
        data: vectors.map((v, index) => ({ index, embedding: b64(v) })),
        usage: { prompt_tokens: 2 },
      }),
    });
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      using t = tape(
        answer([
          [1, 0],
          [0, 1],
        ]),
        answer([[bad, 0]]),
      );
      const err = await failure(embed(t, ["a", "b", "c"], { perRequest: 2 }));
      expect(err).toBeInstanceOf(EmbedError);
      expect(err).toMatchObject({ kind: "not_finite", data: { index: 2 } });
      expect((err as Error).message).toStartWith("input 2 ");
    }
  });

  // Buffer.from(…, "base64") skips what is not base64: a text in the vector's place ("not a
  // vector", 12 characters) decoded to 8 bytes of garbage, two floats stored as the input's meaning.
  test("an embedding that is text but not base64 is bad_response, not decoded into numbers", async () => {
    for (const embedding of ["not a vector", "AACAPwAAAAA=!!!!", "AACA PwAAAAA="]) {
      using t = tape({ status: 200, headers: {}, body: JSON.stringify({ data: [{ index: 0, embedding }] }) });
      expect(await failure(embed(t, ["a"]))).toMatchObject({ kind: "bad_response" });
    }
    // The recorded shape still decodes (112b): [1, 0].
    using ok = tape({
      status: 200,
      headers: {},
      body: JSON.stringify({ data: [{ index: 0, embedding: "AACAPwAAAAA=" }] }),
    });
    expect((await embed(ok, ["a"])).embeddings).toEqual([[1, 0]]);
  });

  test("vectors of another width in a later batch, or a token count no result can carry, are not passed on", async () => {
    const answer = (vectors: number[][], tokens: unknown) => ({
      status: 200,
      headers: {},
      body: JSON.stringify({
        data: vectors.map((embedding, index) => ({ index, embedding })),
        usage: { prompt_tokens: tokens },
      }),
    });
    using widths = tape(answer([[1, 0]], 1), answer([[1, 0, 0]], 1));
    expect(await failure(embed(widths, ["a", "b"], { perRequest: 1 }))).toMatchObject({
      kind: "bad_response",
    });
    for (const tokens of [-5, 1.5, "7"]) {
      using t = tape(answer([[1, 0]], tokens));
      expect((await embed(t, ["a"])).promptTokens).toBe(0);
    }
  });
});

// A wedged embedding server answers nothing, so each request is of bounded work, under a deadline
// that grows with its estimated tokens (embed-budget.ts; docs/protocol.md#embed).
describe("embedding requests of bounded work, each under its own watch", () => {
  test("a token a byte plus two markers, never past the slot's context; a deadline from the floor up to its cap", () => {
    expect(inputTokens("hello world")).toBe(13);
    expect(inputTokens("é")).toBe(4);
    expect(inputTokens("x".repeat(5000), 512)).toBe(512);
    // The context unknown: no more than the longest an embedding model reads, so a 1 MiB input's
    // deadline is not 14 hours of its bytes.
    expect(inputTokens("x".repeat(2 ** 20))).toBe(UNKNOWN_CONTEXT_TOKENS);
    expect(requestDeadlineMs(inputTokens("x".repeat(2 ** 20)), 120_000)).toBeLessThanOrEqual(30 * 60_000);
    const floor = 120_000;
    expect(requestDeadlineMs(13, floor)).toBe(floor);
    // A full request on a slow CPU: longer than the floor, as its tokens need.
    expect(requestDeadlineMs(REQUEST_TOKENS, floor)).toBe((REQUEST_TOKENS / FLOOR_TOKENS_PER_S) * 1000);
    // Behind work in flight: that work counts up to the cap.
    expect(requestDeadlineMs(10 * REQUEST_TOKENS, 5_000, 100)).toBe(DEADLINE_CAP * 5_000);
  });

  test("a low request_timeout_s never cuts a request's own work: the cap bounds only the work ahead of it", () => {
    const full = (REQUEST_TOKENS / FLOOR_TOKENS_PER_S) * 1000;
    // 1 s: a 10 s cap. Before the fix a full request got 10 s where it may take 410 s, and was
    // aborted and its server restarted while honest.
    expect(requestDeadlineMs(REQUEST_TOKENS, 1_000)).toBe(full);
    expect(requestDeadlineMs(3 * REQUEST_TOKENS, 1_000, REQUEST_TOKENS)).toBe(full);
    // A small request behind a queue still waits at most the cap.
    expect(requestDeadlineMs(3 * REQUEST_TOKENS, 1_000, 20)).toBe(DEADLINE_CAP * 1_000);
  });

  test("long inputs go in requests of at most REQUEST_TOKENS estimated tokens; each request is watched with its work and the watch disposed", async () => {
    const s = serve(TINY_EMBED);
    // One stand-in token each (no space), 3,002 estimated: two a request.
    const long = ["a", "b", "c", "d"].map((c) => c.repeat(3000));
    const works: { inputs: number; tokens: number }[] = [];
    let open = 0;
    const watch = ({ inputs, tokens }: { inputs: number; tokens: number }) => {
      works.push({ inputs, tokens });
      open++;
      return { signal: new AbortController().signal, dispose: () => void open-- };
    };
    const out = await embed(s, long, { watch });
    expect(out.embeddings).toHaveLength(4);
    expect(works).toEqual([
      { inputs: 2, tokens: 6004 },
      { inputs: 2, tokens: 6004 },
    ]);
    expect(open).toBe(0);
    // The slot's context caps each estimate: all four in one request.
    works.length = 0;
    await embed(s, long, { watch, maxInputTokens: 512 });
    expect(works).toEqual([{ inputs: 4, tokens: 2048 }]);
  });

  test("a request whose watch aborts ends with the watch's error, the server left as it was", async () => {
    const s = serve(TINY_EMBED);
    s.model.embedWedges = 1;
    const wedge = new AbortController();
    const err = await failure(
      embed(s, ["hello"], {
        watch: () => {
          setTimeout(() => wedge.abort(new Error("the deadline passed")), 10);
          return { signal: wedge.signal, dispose: () => {} };
        },
      }),
    );
    expect((err as Error).message).toBe("the deadline passed");
    expect((await embed(s, ["hello"])).embeddings).toHaveLength(1);
  });
});
