import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { writeUnparsableTestModel } from "../fixtures/llama-test-model.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: a real llama-server writes a reply it cannot parse into its log whole (quirks/90c),
// its newlines giving lines without the message prefix. The model here replies `capybara`,
// newlines and a lone UTF-8 lead byte; through the compiled core, the log it keeps in
// data_dir/logs has the message without the reply (docs/supervisor.md, "No conversation in the log").
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;

if (!BINARY) {
  test.skip("real llama-server log privacy: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("a real llama-server's log through the compiled core", () => {
    test("an unparsable reply is logged by llama-server and kept without its text", async () => {
      await using dir = tmpdir();
      const model = writeUnparsableTestModel(dir.path);
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          "app: { data_dir: ./data }",
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120 }`,
          `model: { path: ${JSON.stringify(model)}, context: 512, max_tokens: 24 }`,
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      const chat = await core.request({ id: 1, method: "chat", params: { input: "hi" } }, 120_000);
      // The model never writes a readable reply: asked again up to app.max_parse_errors, then a
      // result, and llama-server is not restarted for its slips (one start in the log).
      expect(chat.type).toBe("result");
      expect(chat.result.warnings.map((w: { code: string }) => w.code)).toContain("max_parse_errors");
      await core.request({ id: 2, method: "shutdown" }, 30_000);
      expect(await core.exited()).toBe(0);
      const log = readFileSync(join(dir.path, "data", "logs", "llama-server.log"), "utf8");
      expect(log).toMatch(
        new RegExp(
          `\\d W common_chat_peg_parse: unparsed \\S+ output: ${NOT_LOGGED.replace(/[[\]]/g, "\\$&")}`,
        ),
      );
      expect(log).not.toContain("capybara");
      expect(log.match(/^--- .* start /gm)).toHaveLength(1);
      // The message after it is kept: the reply's own lines are all that went.
      const lines = log.split("\n");
      const at = lines.findIndex((l) => l.includes("unparsed"));
      expect(lines[at + 1]).toMatch(/^\d+\.\d{2}\.\d{3}\.\d{3} [IWED] /);
    }, 240_000);
  });
}
