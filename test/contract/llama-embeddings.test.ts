import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { FORMS, perTest, type RunningStandIn, type StartOptions } from "./forms.ts";
import { RECORDINGS } from "./recordings.ts";
import { readExchanges, shape, type Transcript } from "./transcript.ts";

// The stand-in as an embedding server (embeddings.ts), in both forms, each test replaying the
// recorded requests of test/fixtures/llama-server (its README, "Image input and embeddings") and naming
// the recording by its number. The vectors are the stand-in's own; their length, order, norm
// and the error bodies are the recording's.

type Json = Record<string, any>;

const EMBED = { flags: ["--embeddings"] };
/** The recorded exchanges of one transcript. */
const recorded = (file: string): Transcript[] => readExchanges(RECORDINGS, file);
const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const json = (t: Transcript) => JSON.parse(t.body) as Json;

for (const form of FORMS) {
  describe(`llama-server stand-in as an embedding server (${form.name})`, () => {
    const { start } = perTest(form);
    const open = (options: StartOptions) => start({ open: true, ...options });
    /** The recorded request, sent as curl sent it. */
    const replay = (s: RunningStandIn, t: Transcript) =>
      fetch(`${s.baseUrl}${t.path}`, {
        method: t.method,
        headers: t.contentType ? { "Content-Type": t.contentType } : {},
        body: t.method === "GET" ? undefined : t.requestBody,
      });
    /** Status and body as recorded (error bodies compared whole). */
    const sameError = async (s: RunningStandIn, t: Transcript) => {
      const res = await replay(s, t);
      expect(res.status).toBe(t.status);
      expect(await res.json()).toEqual(json(t));
    };

    test("/v1/embeddings on a chat server: 501 not_supported_error (transcript 110)", async () => {
      const s = await open({});
      await sameError(s, recorded("110-vision-server-embeddings-without-flag.txt")[0]!);
    });

    test("/props and /v1/models of an --embeddings server: n_ctx of the model, n_embd (transcripts 111, 111b)", async () => {
      const s = await open({ embedding: EMBED });
      const props = (await (await replay(s, recorded("111-embed-props.txt")[0]!)).json()) as Json;
      const want = json(recorded("111-embed-props.txt")[0]!);
      expect(props.default_generation_settings.n_ctx).toBe(want.default_generation_settings.n_ctx);
      const models = (await (await replay(s, recorded("111b-embed-v1-models.txt")[0]!)).json()) as Json;
      const card = json(recorded("111b-embed-v1-models.txt")[0]!);
      expect(models.models[0].capabilities).toEqual(card.models[0].capabilities);
      for (const key of ["n_ctx", "n_ctx_train", "n_embd"])
        expect(models.data[0].meta[key]).toBe(card.data[0].meta[key]);
    });

    test("/v1/embeddings with a list, a string, base64: order, width, norm, model echoed (transcripts 112, 112b, 112c)", async () => {
      const s = await open({ embedding: EMBED });
      const [list] = recorded("112-embed-v1-embeddings-list.txt");
      const got = (await (await replay(s, list!)).json()) as Json;
      const want = json(list!);
      expect(shape(got)).toEqual(shape(want));
      expect(got.model).toBe(want.model);
      expect(got.data.map((d: Json) => d.index)).toEqual([0, 1]);
      for (const d of got.data) {
        expect(d.embedding).toHaveLength(want.data[0].embedding.length);
        expect(norm(d.embedding)).toBeCloseTo(1, 5);
      }
      expect(got.data[0].embedding).not.toEqual(got.data[1].embedding);
      // The same text is the same vector, alone or in a list, as recorded.
      const [one] = recorded("112c-embed-v1-embeddings-string.txt");
      expect(json(one!).data[0].embedding).toEqual(want.data[0].embedding);
      const single = (await (await replay(s, one!)).json()) as Json;
      expect(shape(single)).toEqual(shape(json(one!)));
      expect(single.data[0].embedding).toEqual(got.data[0].embedding);
      expect(single.usage.prompt_tokens).toBe(json(one!).usage.prompt_tokens);
      const [b64] = recorded("112b-embed-v1-embeddings-base64.txt");
      const encoded = (await (await replay(s, b64!)).json()) as Json;
      expect(shape(encoded)).toEqual(shape(json(b64!)));
      const floats = new Float32Array(
        new Uint8Array(Buffer.from(encoded.data[0].embedding, "base64")).buffer,
      );
      expect([...floats]).toEqual(single.data[0].embedding.map((x: number) => Math.fround(x)));
    });

    test("/embedding: the pooled vector inside one more list, per input (transcript 113)", async () => {
      const s = await open({ embedding: EMBED });
      const [one, list] = recorded("113-embed-native-embedding.txt");
      const got = (await (await replay(s, one!)).json()) as Json;
      expect(shape(got)).toEqual(shape(json(one!)));
      expect(got[0].embedding).toHaveLength(1);
      expect(norm(got[0].embedding[0])).toBeCloseTo(1, 5);
      const both = (await (await replay(s, list!)).json()) as Json;
      expect(both.map((d: Json) => d.index)).toEqual(json(list!).map((d: Json) => d.index));
      expect(both[0].embedding).toEqual(got[0].embedding);
    });

    test("512 tokens pass; 602 are refused, never truncated: 500 past the batch, 400 past the positions (transcript 114)", async () => {
      const [fits, tooLong, tooLongNative, capped] = recorded("114-embed-input-longer-than-context.txt");
      const s = await open({ embedding: EMBED });
      const ok = (await (await replay(s, fits!)).json()) as Json;
      expect(ok.usage).toEqual(json(fits!).usage);
      await sameError(s, tooLong!);
      await sameError(s, tooLongNative!);
      await s.stop();
      const wide = await open({
        embedding: { flags: ["--embeddings", "-c", "1024", "-ub", "1024", "-b", "1024"] },
      });
      await sameError(wide, capped!);
    });

    test('"" is [CLS] [SEP], 2 tokens; [] is a 500 (transcript 115)', async () => {
      const [empty, none, emptyNative] = recorded("115-embed-empty-string.txt");
      const s = await open({ embedding: EMBED });
      const got = (await (await replay(s, empty!)).json()) as Json;
      expect(got.usage).toEqual(json(empty!).usage);
      await sameError(s, none!);
      const native = await replay(s, emptyNative!);
      expect(native.status).toBe(emptyNative!.status);
      expect(shape(await native.json())).toEqual(shape(json(emptyNative!)));
    });

    test("a chat on a BERT embedding server is a 500; a llama model with --embeddings chats and embeds (transcripts 116, 96)", async () => {
      const [bertChat, , llamaChat, llamaEmbed] = recorded("116-embed-chat-on-embedding-server.txt");
      const s = await open({ embedding: EMBED });
      await sameError(s, bertChat!);
      await s.stop();
      const llama = await open({
        embedding: { flags: ["--embeddings", "--pooling", "mean"], decoder: true },
      });
      expect((await replay(llama, llamaChat!)).status).toBe(200);
      const embedded = (await (await replay(llama, llamaEmbed!)).json()) as Json;
      expect(embedded.usage).toEqual(json(llamaEmbed!).usage);
      const [pair] = recorded("96-embeddings-llama-pooling-mean.txt");
      // 96 prints its inline body unquoted, so its words cannot be read back: this is that body.
      const body = JSON.stringify({ input: ["hello world", "another text"] });
      const two = (await (await replay(llama, { ...pair!, requestBody: body })).json()) as Json;
      expect(two.usage).toEqual(json(pair!).usage);
      expect(shape(two)).toEqual(shape(json(pair!)));
    });

    test("--pooling none: a vector per token, not normalized, on /embedding; /v1/embeddings refuses (transcript 117)", async () => {
      const [, perToken, refused] = recorded("117-embed-pooling-none-vs-mean.txt");
      const s = await open({ embedding: { flags: ["--embeddings", "--pooling", "none"] } });
      const got = (await (await replay(s, perToken!)).json()) as Json;
      const want = json(perToken!);
      expect(got[0].embedding).toHaveLength(want[0].embedding.length);
      expect(got[0].embedding[0]).toHaveLength(want[0].embedding[0].length);
      expect(norm(got[0].embedding[0])).not.toBeCloseTo(1, 2);
      await sameError(s, refused!);
    });

    // Only the process prints llama-server's start-up log.
    if (form.name === "subprocess")
      test("--embeddings makes the batch the micro-batch, as the start-up log says (transcript 119)", async () => {
        const s = await open({ embedding: EMBED });
        const lines = readFileSync(join(RECORDINGS, "transcripts", "119-embed-startup-log.txt"), "utf8")
          .split("\n")
          .filter((l) => l.includes("llama_server:") && l.includes("n_ubatch"))
          .map((l) => l.replace(/^[\d.]+ /, ""));
        expect(lines).toHaveLength(2);
        for (const line of lines) expect(s.log()).toContain(line);
      });

    test("--reranking: /v1/rerank sorted by score, /v1/embeddings all zeros; without it 501 (transcripts 118, 118b)", async () => {
      const [rerank, zeros] = recorded("118-embed-rerank.txt");
      const s = await open({ embedding: { flags: ["--reranking"] } });
      const got = (await (await replay(s, rerank!)).json()) as Json;
      expect(shape(got)).toEqual(shape(json(rerank!)));
      const scores = got.results.map((r: Json) => r.relevance_score);
      expect(scores).toEqual([...scores].sort((a: number, b: number) => b - a));
      expect(got.results.map((r: Json) => r.index).sort()).toEqual([0, 1, 2]);
      const flat = (await (await replay(s, zeros!)).json()) as Json;
      expect(flat.data[0].embedding).toEqual(json(zeros!).data[0].embedding.map(Math.abs));
      await s.stop();
      const plain = await open({ embedding: EMBED });
      await sameError(plain, recorded("118b-embed-rerank-without-flag.txt")[0]!);
    });
  });
}
