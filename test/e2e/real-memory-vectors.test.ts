import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { realServerTestModel } from "../fixtures/llama-test-model.ts";
import { REAL_MODELS_DIR } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: memory with vectors against a real llama-server (docs/agent.md "Memory"; issue 29):
// the chat model the fixture writes and llama.cpp's tiny-embed.gguf (BERT, random weights) as the
// embedding model. Random weights carry no meaning, so the mechanics are checked: the turn's row
// embedded in the background with the model's own width, status counting it, a question that
// shares no word with it recalled through its vector.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const EMBED = join(REAL_MODELS_DIR, "tiny-embed.gguf");
const MODEL = BINARY ? realServerTestModel() : undefined;

if (!BINARY || !MODEL || !existsSync(EMBED)) {
  test.skip(`real llama-server memory vectors: set LOCAL_AI_TEST_LLAMA_SERVER (and have ${EMBED}) to run (skipped)`, () => {});
} else {
  describe("memory with a real embedding model", () => {
    test("a turn embedded off the turn's path, then recalled by a question sharing no word with it", async () => {
      await using dir = tmpdir();
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120 }`,
          `model: { path: ${JSON.stringify(MODEL)}, max_tokens: 8 }`,
          `models: [{ name: embed, path: ${JSON.stringify(EMBED)}, kind: embedding }]`,
          "memory: { embedding_model: embed }",
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      const first = await core.request(
        { id: 1, method: "chat", params: { input: "the harbour lamp glows", session_id: "a" } },
        180_000,
      );
      expect(first.type).toBe("result");
      let index: { embedded: number; total: number } | null = null;
      for (let i = 0; i < 600; i++) {
        index = (await core.request({ id: `s${i}`, method: "status" })).result.memory_index;
        if (index && index.total >= 1 && index.embedded === index.total) break;
        // Pings are answered at once while the job runs.
        const ping = await core.request({ id: `p${i}`, method: "ping" }, 2_000);
        expect(ping.result).toEqual({ status: "ok" });
        await Bun.sleep(200);
      }
      expect(index).toMatchObject({ embedded: 1, total: 1, model: "embed", set_aside: 0 });
      const width = (await core.request({ id: "e", method: "embed", params: { input: "x" } }, 60_000)).result
        .dimensions;
      expect(width).toBeGreaterThan(0);
      const ask = await core.request(
        { id: 2, method: "chat", params: { input: "which mountain river freezes", session_id: "b" } },
        180_000,
      );
      expect(ask.type).toBe("result");
      const done = core.messages.find((m) => m.id === 2 && m.type === "event" && m.event === "memory_done");
      expect(done?.hits).toBe(1);
      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);
  });
}
