import { describe, expect, test } from "bun:test";
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Msg, spawnCore } from "../fixtures/core-process.ts";
import { realServerTestModel } from "../fixtures/llama-test-model.ts";
import { THINK_TEMPLATE as TEMPLATE } from "../fixtures/recordings-dir.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: the compiled core and a real llama-server started with the thinking template the
// recordings used (chatml_think.jinja through llama.extra_args, transcripts 91–91i), and
// structured output (95–95d). The tiny random-weight model never closes its think block on
// its own, so a reply is all reasoning unless a budget or think: false ends it.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
// LOCAL_AI_TEST_MODEL overrides the tiny model the fixture writes (test/fixtures/llama-test-model.ts).
const MODEL = BINARY ? realServerTestModel() : undefined;

const events = (ms: Msg[], id: string) => ms.filter((m) => m.id === id && m.type === "event");
const warningCodes = (r: Msg) => (r.result.warnings as { code: string }[]).map((w) => w.code);

if (!BINARY || !MODEL) {
  test.skip("real llama-server reasoning: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("the compiled core with a real llama-server and a thinking template", () => {
    test("reasoning streams and is stored, think maps, reasoning_only, response_format after thinking, a refused schema", async () => {
      await using dir = tmpdir();
      copyFileSync(TEMPLATE, join(dir.path, "think.jinja"));
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, parallel: 1, extra_args: [--chat-template-file, think.jinja] }`,
          `model: { path: ${JSON.stringify(MODEL)}, context: 2048 }`,
          "agents:",
          "  - { name: assistant, system_prompt: You are terse., max_tokens: 24, temperature: 0 }",
          // Room for the JSON after the thinking, as 91i had (max_tokens 80).
          "  - { name: json, system_prompt: You are terse., max_tokens: 80, temperature: 0 }",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      const plan = await core.request({ id: "plan", method: "plan" }, 30_000);
      expect(plan.result.plan.chat_template).toMatchObject({ source: "file", thinking: true });

      // The whole reply is thinking (91): llm_reasoning, no chunk, reasoning_only at the cap.
      const c1 = await core.request(
        { id: "c1", method: "chat", params: { input: "hi", session_id: "s" } },
        180_000,
      );
      expect(c1.type).toBe("result");
      const thought = events(core.messages, "c1").filter((e) => e.event === "llm_reasoning");
      expect(thought.length).toBeGreaterThan(0);
      expect(c1.result.reasoning).toBe(thought.map((e) => e.delta).join(""));
      expect(c1.result.response).toBe("");
      expect(warningCodes(c1)).toContain("reasoning_only");
      expect(warningCodes(c1)).not.toContain("empty_reply");
      const status = (await core.request({ id: "st", method: "status" })).result;
      expect(status.llama.thinking).toBe(true);
      const got = (await core.request({ id: "g", method: "sessions.get", params: { session_id: "s" } }))
        .result;
      expect(got.messages[1]).toMatchObject({
        role: "assistant",
        content: "",
        reasoning: c1.result.reasoning,
      });

      // think false: the template closes the block, the text streams as content (91c); the
      // earlier turn's thinking is not sent back (a history reasoning_content would be a 500
      // if null, 91g: the chat would fail).
      const c2 = await core.request(
        { id: "c2", method: "chat", params: { input: "again", session_id: "s", think: false } },
        120_000,
      );
      expect(c2.type).toBe("result");
      expect(c2.result.reasoning).toBe("");
      expect(c2.result.response.length).toBeGreaterThan(0);
      expect(events(core.messages, "c2").some((e) => e.event === "llm_chunk")).toBe(true);

      // A budget ends the block and the model answers (91d).
      const c3 = await core.request(
        { id: "c3", method: "chat", params: { input: "hi", think: { budget_tokens: 4 } } },
        120_000,
      );
      expect(c3.type).toBe("result");
      expect(c3.result.reasoning.length).toBeGreaterThan(0);
      expect(c3.result.response.length).toBeGreaterThan(0);

      // Reasoning first, then the answer under the schema's grammar (91i): valid, or failing closed.
      const schema = {
        type: "object",
        properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
        required: ["name", "age"],
      };
      const c4 = await core.request(
        {
          id: "c4",
          method: "chat",
          params: {
            input: "a person",
            think: { budget_tokens: 4 },
            response_format: { type: "json_schema", schema },
            agent: "json",
          },
        },
        120_000,
      );
      if (c4.type === "result") {
        expect(typeof c4.result.json.name).toBe("string");
        expect(Number.isInteger(c4.result.json.age)).toBe(true);
        expect(c4.result.reasoning.length).toBeGreaterThan(0);
      } else {
        expect(c4).toMatchObject({ code: "output_invalid", data: { text: expect.any(String) } });
      }

      // A dangling $ref (95d): invalid_request naming response_format, the server unharmed.
      const bad = await core.request(
        {
          id: "c5",
          method: "chat",
          params: {
            input: "x",
            response_format: {
              type: "json_schema",
              schema: { type: "object", properties: { a: { $ref: "#/nowhere" } } },
            },
          },
        },
        60_000,
      );
      expect(bad).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { field: "response_format" },
      });
      const after = await core.request(
        { id: "c6", method: "chat", params: { input: "hi", think: false } },
        60_000,
      );
      expect(after.type).toBe("result");

      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);
  });
}
