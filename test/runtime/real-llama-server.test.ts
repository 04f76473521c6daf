import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { SETTINGS } from "./helpers/harness.ts";

// Opt-in: the same supervisor against a real llama-server and a real GGUF.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODEL = process.env.LOCAL_AI_TEST_MODEL;

if (!BINARY || !MODEL) {
  test.skip("real llama-server: set LOCAL_AI_TEST_LLAMA_SERVER and LOCAL_AI_TEST_MODEL to run (skipped)", () => {});
} else {
  describe("supervisor against a real llama-server", () => {
    test("starts, answers a chat with our key, refuses without it, stops", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => ({
          argv: ["-m", MODEL, "-c", "2048", "-np", "1", "--jinja"],
          slots: 1,
          context_per_slot: 2048,
          model_path: MODEL,
          max_tokens: null,
        }),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      const lease = await supervisor.acquire(new AbortController().signal);
      const pid = supervisor.pid() as number;
      try {
        const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { Authorization: `Bearer ${lease.apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: "Say hello." }], max_tokens: 4 }),
        });
        expect(res.status).toBe(200);
        expect((await fetch(`${lease.baseUrl}/v1/models`)).status).toBe(401);
      } finally {
        lease.release();
        await supervisor.stop();
      }
      expect(() => process.kill(pid, 0)).toThrow();
    }, 120_000);

    test("a missing model → model_missing", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => ({
          argv: ["-m", join(dir.path, "nope.gguf")],
          slots: 1,
          context_per_slot: 512,
          model_path: "",
          max_tokens: null,
        }),
        dataDir: () => join(dir.path, "data"),
        settings: () => SETTINGS,
        reap: false,
      });
      await expect(supervisor.acquire(new AbortController().signal)).rejects.toMatchObject({
        code: "model_missing",
      });
    }, 60_000);
  });
}
