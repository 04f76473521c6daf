import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { b64, png } from "../fixtures/images.ts";
import { REAL_MODELS_DIR, realModelsSkip } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: images through the compiled core and a real llama-server (LOCAL_AI_TEST_LLAMA_SERVER)
// with llama.cpp's tiny vision pair (tiny-vision.gguf + tiny-vision-mmproj.gguf: a fixed 64
// tokens an image, transcripts/103). The projector is passed by `llama.extra_args` here: its
// own `mmproj` config (auto, a path, none) is the projector side of issue 30, built apart.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODEL = join(REAL_MODELS_DIR, "tiny-vision.gguf");
const MMPROJ = join(REAL_MODELS_DIR, "tiny-vision-mmproj.gguf");

function config(dir: string, withProjector: boolean, projector = MMPROJ, context = 2048): void {
  const extra = withProjector ? `, extra_args: ["--mmproj", ${JSON.stringify(projector)}]` : "";
  writeFileSync(
    join(dir, "config.yaml"),
    [
      `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, parallel: 1${extra} }`,
      `model: { path: ${JSON.stringify(MODEL)}, context: ${context}, max_tokens: 8 }`,
      "agents: [{ name: assistant, system_prompt: You describe images., tools: [] }]",
      "memory: { enabled: false }",
    ].join("\n"),
  );
}

if (!BINARY) {
  test.skip("real llama-server images: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else if (!existsSync(MODEL) || !existsSync(MMPROJ)) {
  test.skip(realModelsSkip("real llama-server images"), () => {});
} else {
  describe("images with a real llama-server", () => {
    test("the image counted as the projector makes it (64), and not encoded again on the next turn", async () => {
      await using dir = tmpdir();
      config(dir.path, true);
      await using core = spawnCore({ cwd: dir.path });
      const first = await core.request(
        {
          id: 1,
          method: "chat",
          params: { session_id: "v", input: "What is in this image?", images: [{ data: b64(png(64, 64)) }] },
        },
        180_000,
      );
      expect(first.type).toBe("result");
      expect(first.result.usage.image_tokens).toBe(64);
      const second = await core.request(
        { id: 2, method: "chat", params: { session_id: "v", input: "And its colour?" } },
        120_000,
      );
      expect(second.type).toBe("result");
      const usage = second.result.usage;
      // The image is sent again (it is part of the conversation) but comes from the slot's cache:
      // everything of the first turn's prompt, its 64 image tokens included.
      expect(usage.image_tokens).toBe(64);
      expect(usage.cached_tokens).toBeGreaterThanOrEqual(first.result.usage.prompt_tokens);
      console.log(
        `real vision: turn 2 processed ${usage.prompt_tokens - usage.cached_tokens} of ${usage.prompt_tokens} prompt tokens`,
      );
      await core.request({ id: 3, method: "shutdown" }, 30_000);
    }, 400_000);

    test("the projector file deleted while loaded: the running server still reads images", async () => {
      await using dir = tmpdir();
      const copy = join(dir.path, "mmproj.gguf");
      copyFileSync(MMPROJ, copy);
      config(dir.path, true, copy);
      await using core = spawnCore({ cwd: dir.path });
      const first = await core.request(
        { id: 1, method: "chat", params: { input: "one", images: [{ data: b64(png(16, 16)) }] } },
        180_000,
      );
      expect(first.type).toBe("result");
      unlinkSync(copy);
      const second = await core.request(
        { id: 2, method: "chat", params: { input: "two", images: [{ data: b64(png(32, 32)) }] } },
        120_000,
      );
      expect(second.type).toBe("result");
      expect(second.result.usage.image_tokens).toBe(64);
      await core.request({ id: 3, method: "shutdown" }, 30_000);
    }, 400_000);

    test("a prompt whose image does not fit the slot: invalid_request with the counts, image included (104)", async () => {
      await using dir = tmpdir();
      config(dir.path, true, MMPROJ, 256);
      await using core = spawnCore({ cwd: dir.path });
      const words = Array.from({ length: 200 }, (_, i) => `word${i % 10}`).join(" ");
      const chat = await core.request(
        {
          id: 1,
          method: "chat",
          params: { session_id: "o", input: words, images: [{ data: b64(png(8, 8)) }] },
        },
        180_000,
      );
      expect(chat).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { reason: "context_overflow" },
      });
      expect(chat.data.n_prompt_tokens).toBeGreaterThan(chat.data.n_ctx);
      const list = await core.request({ id: 2, method: "sessions.list", params: {} });
      expect(list.result.sessions).toEqual([]);
      await core.request({ id: 3, method: "shutdown" }, 30_000);
    }, 400_000);

    test("a session's saved slot is not restored under another projector (model.mmproj): its images are read again", async () => {
      // The slot holds the embeddings the first projector made; llama-server matches the image by
      // its bytes alone, so a restore under the second answered from them (agent/kv/fingerprint.ts).
      await using dir = tmpdir();
      const other = join(dir.path, "mmproj-other.gguf");
      const bytes = readFileSync(MMPROJ);
      bytes.fill(0, bytes.length - 40_000); // the same projector's shape, other weights
      writeFileSync(other, bytes);
      const write = (projector: string) =>
        writeFileSync(
          join(dir.path, "config.yaml"),
          [
            `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, parallel: 1 }`,
            `model: { path: ${JSON.stringify(MODEL)}, context: 2048, max_tokens: 8, mmproj: ${JSON.stringify(projector)} }`,
            "agents: [{ name: assistant, system_prompt: You describe images., tools: [] }]",
            "memory: { enabled: false }",
          ].join("\n"),
        );
      const image = { data: b64(png(32, 32)) };
      write(MMPROJ);
      {
        await using core = spawnCore({ cwd: dir.path });
        const first = await core.request(
          { id: 1, method: "chat", params: { session_id: "p", input: "look", images: [image] } },
          180_000,
        );
        expect(first.type).toBe("result");
        await core.request({ id: 2, method: "shutdown" }, 30_000); // saves the slot
      }
      {
        // Under the same projector it is restored, the image with it.
        await using core = spawnCore({ cwd: dir.path });
        const same = await core.request(
          { id: 5, method: "chat", params: { session_id: "p", input: "same" } },
          180_000,
        );
        expect(same.result.usage.cached_tokens).toBeGreaterThan(64);
        await core.request({ id: 6, method: "shutdown" }, 30_000);
      }
      write(other);
      await using core = spawnCore({ cwd: dir.path });
      const again = await core.request(
        { id: 3, method: "chat", params: { session_id: "p", input: "again" } },
        180_000,
      );
      expect(again.type).toBe("result");
      expect(again.result.usage.image_tokens).toBe(64);
      expect(again.result.usage.cached_tokens).toBe(0);
      await core.request({ id: 4, method: "shutdown" }, 30_000);
    }, 400_000);

    test("the same model without its projector: model_not_vision from its /props, nothing sent", async () => {
      await using dir = tmpdir();
      config(dir.path, false);
      await using core = spawnCore({ cwd: dir.path });
      const chat = await core.request(
        { id: 1, method: "chat", params: { input: "look", images: [{ data: b64(png(8, 8)) }] } },
        180_000,
      );
      expect(chat).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { reason: "model_not_vision" },
      });
      await core.request({ id: 2, method: "shutdown" }, 30_000);
    }, 400_000);
  });
}
