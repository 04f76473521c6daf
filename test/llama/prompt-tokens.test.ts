import { afterEach, expect, test } from "bun:test";
import { LlmError } from "../../src/llama/errors.ts";
import { templatedPromptTokens } from "../../src/llama/prompt-tokens.ts";
import { TAPE_KEY } from "./tape.ts";

// The prompt's count without its images (llama/prompt-tokens.ts) is asked while llama-server
// reads the prompt, and the step waits for it once the reply is done (agent/turn/llm-step.ts): an
// /apply-template that trickles a byte at a time and never ends held the user's turn unanswered
// after its reply had come, with no deadline but the host's cancel.

let stop: (() => void) | undefined;
afterEach(() => stop?.());

test("an /apply-template that never ends is connection_lost at the count's deadline, not awaited for ever", async () => {
  let sent = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () =>
      new Response(
        new ReadableStream({
          async pull(c) {
            // One byte, then the next once this one was taken: a server that never finishes.
            c.enqueue(new TextEncoder().encode(sent++ === 0 ? '{"prompt":"' : " "));
            await Bun.sleep(20);
          },
        }),
        { headers: { "content-type": "application/json" } },
      ),
  });
  stop = () => server.stop(true);
  const err = await templatedPromptTokens(
    { baseUrl: `http://127.0.0.1:${server.port}`, apiKey: TAPE_KEY },
    { messages: [] },
    new AbortController().signal,
    200,
  ).catch((e) => e);
  expect(err).toBeInstanceOf(LlmError);
  expect((err as LlmError).kind).toBe("connection_lost");
});
