import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { realServerTestModel } from "../fixtures/llama-test-model.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: after sessions.delete the core empties the slot the session held in the real
// llama-server (/slots/0?action=erase). The next session's first turn then reuses nothing: had
// the slot kept the deleted prompt, their shared system prompt would be reused from it (and
// llama-server would have kept the deleted prompt in its RAM cache on the way; docs/agent.md,
// "Prompt reuse").
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODEL = BINARY ? realServerTestModel() : undefined;

if (!BINARY || !MODEL) {
  test.skip("real llama-server slot erase: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("an erased session's slot in a real llama-server", () => {
    test("is emptied: the next session's first turn reuses none of it", async () => {
      await using dir = tmpdir();
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          "app: { data_dir: ./data }",
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, parallel: 1 }`,
          `model: { path: ${JSON.stringify(MODEL)}, context: 1024, max_tokens: 4 }`,
          "agents: [{ name: assistant, system_prompt: You are a terse assistant who answers in one short line. }]",
          "memory: { enabled: false }",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      const chat = async (id: string, session: string, input: string) => {
        const r = await core.request({ id, method: "chat", params: { session_id: session, input } }, 120_000);
        expect(r.type).toBe("result");
        return r.result.usage as { prompt_tokens: number; cached_tokens?: number };
      };
      await chat("1", "a", "hello");
      // Before any erase the same system prompt is reused from the slot by another session.
      const before = await chat("2", "b", "hello again");
      expect(before.cached_tokens ?? 0).toBeGreaterThan(0);
      const del = await core.request({ id: "d", method: "sessions.delete", params: { session_id: "b" } });
      expect(del.result).toMatchObject({ deleted: true });
      const after = await chat("3", "c", "hello once more");
      expect(after.cached_tokens ?? 0).toBe(0);
      await core.request({ id: "x", method: "shutdown" }, 30_000);
      expect(await core.exited()).toBe(0);
    }, 240_000);
  });
}
