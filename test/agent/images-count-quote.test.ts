import { expect, spyOn, test } from "bun:test";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { logger } from "../../src/util/logger.ts";
import { b64, png } from "../fixtures/images.ts";
import type { IncomingRequest } from "../fixtures/llama-stand-in/model.ts";
import { ChatHarness } from "./harness.ts";

// The count of a chat's image tokens (llama/prompt-tokens.ts) posts the whole conversation to
// /apply-template; llama-server's 500 for a body its parser stopped in quotes what it last read
// (nlohmann's `last read: '…'`, the shape test/runtime/log-redact.test.ts "withoutQuotes"
// records). That reason went to the info log as it was: the user's words kept in data_dir/logs
// past `sessions.delete` (docs/protocol.md: logs at info and above never quote a conversation).

const AGENTS = { agents: [{ name: "a", system_prompt: "Be brief.", tools: [] }] };

test("an /apply-template 500 quoting the conversation leaves no quoted words in the log", async () => {
  await using h = new ChatHarness(AGENTS, { standIn: () => ({ vision: { tokensPerImage: 64 } }) });
  const model = h.llama.model;
  const real = model.handle.bind(model);
  model.handle = (req: IncomingRequest) =>
    req.path === "/apply-template"
      ? {
          kind: "json",
          status: 500,
          body: {
            error: {
              code: 500,
              message: `Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 40: syntax error while parsing value - invalid string: missing closing quote; last read: '"the AARDVARK draft, it's private'`,
              type: "server_error",
            },
          },
        }
      : real(req);
  const lines: string[] = [];
  const info = spyOn(logger, "info").mockImplementation((line: string) => void lines.push(line));
  try {
    h.llama.script({ content: "A square." });
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "What is this?",
      images: [{ data: b64(png(8, 8)) }],
    });
    expect(terminal.type).toBe("result");
  } finally {
    info.mockRestore();
  }
  const said = lines.filter((l) => l.includes("image tokens are not known"));
  expect(said).toHaveLength(1);
  expect(said[0]).toContain(`last read: ${NOT_LOGGED}`);
  for (const l of lines) expect(l).not.toMatch(/AARDVARK|private/);
});
