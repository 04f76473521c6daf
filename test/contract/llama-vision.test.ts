import { describe, expect, test } from "bun:test";
import { FORMS, perTest, type RunningStandIn, type StartOptions } from "./forms.ts";
import { RECORDINGS } from "./recordings.ts";
import { readExchanges, type Transcript } from "./transcript.ts";

// The stand-in as a vision server (vision.ts), in both forms, each test replaying the recorded
// requests of test/fixtures/llama-server (100–109) and naming the recording by its number: the
// prompt token counts with images, what /props says, and every error body as recorded.

type Json = Record<string, any>;

const recorded = (file: string): Transcript[] => readExchanges(RECORDINGS, file);
const json = (t: Transcript) => JSON.parse(t.body) as Json;

for (const form of FORMS) {
  describe(`llama-server stand-in as a vision server (${form.name})`, () => {
    const { start } = perTest(form);
    const open = (options: StartOptions) => start({ open: true, ...options });
    const replay = (s: RunningStandIn, t: Transcript) =>
      fetch(`${s.baseUrl}${t.path}`, {
        method: t.method,
        headers: t.contentType ? { "Content-Type": t.contentType } : { "Content-Type": "application/json" },
        body: t.method === "GET" ? undefined : t.requestBody,
      });
    const sameError = async (s: RunningStandIn, t: Transcript) => {
      const res = await replay(s, t);
      expect(res.status).toBe(t.status);
      expect(await res.json()).toEqual(json(t));
    };
    const promptTokens = async (s: RunningStandIn, t: Transcript) =>
      ((await (await replay(s, t)).json()) as Json).usage.prompt_tokens as number;

    test("/props: modalities.vision with a projector, false without (transcripts 100, 105)", async () => {
      const withProjector = await open({ vision: {} });
      const props = (await (
        await replay(withProjector, recorded("100-vision-props.txt")[0]!)
      ).json()) as Json;
      expect(props.modalities).toEqual(json(recorded("100-vision-props.txt")[0]!).modalities);
      await withProjector.stop();
      const without = await open({});
      const bare = (await (
        await replay(without, recorded("105-vision-image-without-mmproj.txt")[1]!)
      ).json()) as Json;
      expect(bare.modalities.vision).toBe(false);
      expect(json(recorded("105-vision-image-without-mmproj.txt")[1]!).modalities.vision).toBe(false);
    });

    test("/v1/models lists multimodal with a projector (transcript 100b), completion alone without (05)", async () => {
      const t = recorded("100b-vision-v1-models.txt")[0]!;
      const withProjector = await open({ vision: {} });
      const listed = (await (await replay(withProjector, t)).json()) as Json;
      expect(listed.models[0].capabilities).toEqual(json(t).models[0].capabilities);
      await withProjector.stop();
      const without = await open({});
      const bare = (await (await replay(without, t)).json()) as Json;
      expect(bare.models[0].capabilities).toEqual(["completion"]);
    });

    test("an image costs its projector's tokens: +64 whatever its size with the fixed one (transcripts 101, 102, 103)", async () => {
      const s = await open({ vision: {} });
      const [textOnly, oneImage, bigImage] = recorded("103-vision-image-token-cost.txt");
      const base = await promptTokens(s, textOnly!);
      expect((await promptTokens(s, oneImage!)) - base).toBe(
        json(oneImage!).usage.prompt_tokens - json(textOnly!).usage.prompt_tokens,
      );
      expect((await promptTokens(s, bigImage!)) - base).toBe(64);
      // Two images in one message: 64 each (102), beside the same text alone.
      const two = recorded("102-vision-chat-two-images.txt")[0]!;
      const body = JSON.parse(two.requestBody) as Json;
      const alone = { ...body, messages: [{ role: "user", content: body.messages[0].content.slice(0, 1) }] };
      const res = await fetch(`${s.baseUrl}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify(alone),
      });
      const text = ((await res.json()) as Json).usage.prompt_tokens as number;
      expect((await promptTokens(s, two)) - text).toBe(128);
      expect(json(two).usage.prompt_tokens).toBe(144);
    });

    test("by size with the pixtral projector: 64×64 → 19, 256×128 → 135 image tokens (transcript 109)", async () => {
      const s = await open({ vision: { patch: 16 } });
      const [textOnly, small, wide] = recorded("109-vision-image-min-max-tokens.txt");
      const base = await promptTokens(s, textOnly!);
      expect((await promptTokens(s, small!)) - base).toBe(19);
      expect((await promptTokens(s, wide!)) - base).toBe(135);
    });

    test("the same image sent again is cached (transcript 106f: 79 of 80)", async () => {
      const s = await open({ vision: {} });
      await replay(s, recorded("101-vision-chat-image-nonstream.txt")[0]!);
      const again = (await (await replay(s, recorded("106f-vision-raw-base64.txt")[0]!)).json()) as Json;
      expect(again.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(64);
    });

    test("a prompt with an image over the context: the 400 counts the image tokens (transcript 104)", async () => {
      const s = await open({ vision: {}, nCtx: 256, slots: 1 });
      const [textOnly, withImage, streamed] = recorded("104-vision-image-exceeds-context.txt");
      const text = await promptTokens(s, textOnly!);
      const res = await replay(s, withImage!);
      expect(res.status).toBe(400);
      const body = (await res.json()) as Json;
      expect(body.error.type).toBe("exceed_context_size_error");
      expect(body.error.n_prompt_tokens).toBe(text + 64);
      expect((await replay(s, streamed!)).status).toBe(400);
    });

    test("the recorded refusals, body for body (transcripts 105, 106, 106b, 106d, 106e, 106g, 107, 107b)", async () => {
      const s = await open({ vision: {} });
      for (const file of [
        "106-vision-bad-base64.txt",
        "106b-vision-garbage-bytes.txt",
        "106d-vision-webp.txt",
        "106e-vision-non-image-mime.txt",
        "106g-vision-unknown-part-type.txt",
        "107b-vision-file-url.txt",
      ])
        await sameError(s, recorded(file)[0]!);
      for (const t of recorded("107-vision-remote-url.txt")) await sameError(s, t);
      const bare = await open({});
      await sameError(bare, recorded("105-vision-image-without-mmproj.txt")[0]!);
    });

    test("a GIF is read like any image (transcript 106c)", async () => {
      const s = await open({ vision: {} });
      const t = recorded("106c-vision-gif.txt")[0]!;
      const res = await replay(s, t);
      expect(res.status).toBe(200);
    });

    test("/apply-template and /tokenize count a text prompt as a chat of it (transcripts 32, 103)", async () => {
      const s = await open({ vision: {} });
      const textOnly = recorded("103-vision-image-token-cost.txt")[0]!;
      const body = JSON.parse(textOnly.requestBody) as Json;
      const prompt = (
        (await (
          await fetch(`${s.baseUrl}/apply-template`, { method: "POST", body: JSON.stringify(body) })
        ).json()) as Json
      ).prompt as string;
      expect(prompt).toStartWith("<|im_start|>user\n");
      const tokens = (
        (await (
          await fetch(`${s.baseUrl}/tokenize`, {
            method: "POST",
            body: JSON.stringify({ content: prompt, add_special: true }),
          })
        ).json()) as Json
      ).tokens as number[];
      expect(tokens.length).toBe(await promptTokens(s, textOnly));
    });
  });
}
