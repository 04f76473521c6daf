import { describe, expect, test } from "bun:test";
import { streamCompletion } from "../../src/llama/completion.ts";
import { statusOf } from "../../src/llama/http.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { writeLlamaTestModel } from "../fixtures/llama-test-model.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: the model the real-server suites run on (test/fixtures/llama-test-model.ts), held to
// what they need from it, straight against llama-server with --jinja as the planner starts it.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;

const TOOLS = [
  {
    type: "function",
    function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } } } },
  },
];

/** llama-server on the model as the planner starts it (--jinja), on a free port. */
async function serve(binary: string, model: string) {
  const port = await pickFreePort();
  const proc = Bun.spawn([binary, "-m", model, "--jinja", "-c", "1024", "--port", String(port)], {
    stdout: "ignore",
    stderr: "ignore",
  });
  return { proc, port };
}

if (!BINARY) {
  test.skip("the written test model: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("the written test model on a real llama-server", () => {
    test("loads, serves a streamed chat, tokenizes by byte fallback, shows its template, takes tools", async () => {
      await using dir = tmpdir();
      const { proc, port } = await serve(BINARY, writeLlamaTestModel(dir.path));
      const base = `http://127.0.0.1:${port}`;
      // Each on a connection of its own: llama-server closes one after a stream (the next test).
      const post = (path: string, body: unknown) =>
        fetch(`${base}${path}`, { method: "POST", body: JSON.stringify(body), keepalive: false });
      try {
        let health = 0;
        for (let i = 0; i < 300 && health !== 200 && proc.exitCode === null; i++) {
          health = await fetch(`${base}/health`).then(
            (r) => r.status,
            () => 0,
          );
          if (health !== 200) await Bun.sleep(100);
        }
        expect(health).toBe(200);

        const props = (await (await fetch(`${base}/props`)).json()) as Record<string, any>;
        expect(props.chat_template).toContain("<tool_call>");
        expect(props.chat_template_caps).toMatchObject({ supports_tools: true, supports_tool_calls: true });

        // Words of the vocabulary are whole pieces; "é" is two byte tokens (<0xC3> <0xA9>).
        const tok = (await (await post("/tokenize", { content: "hello the sea é" })).json()) as {
          tokens: number[];
        };
        const back = (await (await post("/detokenize", { tokens: tok.tokens })).json()) as {
          content: string;
        };
        expect(back.content).toBe("hello the sea é");
        expect(tok.tokens.length).toBeLessThan("hello the sea é".length);

        const stream = await post("/v1/chat/completions", {
          stream: true,
          max_tokens: 12,
          temperature: 0,
          messages: [{ role: "user", content: "Say hello." }],
        });
        expect(stream.status).toBe(200);
        const deltas = (await stream.text()).split("\n").filter((l) => l.includes('"content":"'));
        expect(deltas.length).toBeGreaterThan(0);

        const tools = await post("/v1/chat/completions", {
          max_tokens: 8,
          temperature: 0,
          tools: TOOLS,
          messages: [{ role: "user", content: "what time is it?" }],
        });
        expect(tools.status).toBe(200);
      } finally {
        proc.kill("SIGTERM");
        await proc.exited;
      }
    }, 120_000);

    test("the core's client sends the request right after a stream on a live connection, 30 times in a row", async () => {
      await using dir = tmpdir();
      const { proc, port } = await serve(BINARY, writeLlamaTestModel(dir.path));
      const endpoint = { baseUrl: `http://127.0.0.1:${port}`, apiKey: "" };
      try {
        for (let i = 0; i < 300 && (await statusOf(endpoint, "/health")) !== 200; i++) await Bun.sleep(100);
        const failures: string[] = [];
        for (let i = 0; i < 30; i++) {
          const request = { messages: [{ role: "user" as const, content: `hello ${i}` }], max_tokens: 4 };
          await streamCompletion(endpoint, request, {
            signal: new AbortController().signal,
            onDelta: () => {},
          });
          // Sent at once: on the stream's connection it would meet llama-server closing it.
          const status = await statusOf(endpoint, "/v1/chat/completions", {
            body: JSON.stringify({ ...request, max_tokens: 2 }),
          });
          if (status !== 200) failures.push(`${i}: ${status}`);
        }
        expect(failures).toEqual([]);
      } finally {
        proc.kill("SIGTERM");
        await proc.exited;
      }
    }, 120_000);

    test("a q4_0 KV cache is refused by its head size (16), as with tiny-llama", async () => {
      await using dir = tmpdir();
      const model = writeLlamaTestModel(dir.path);
      const run = Bun.spawnSync([BINARY, "-m", model, "-c", "512", "-ctk", "q4_0", "--port", "0"], {
        timeout: 60_000,
      });
      expect(run.exitCode).toBe(1);
      expect(run.stderr.toString()).toContain("does not divide n_embd_head_k=16");
    }, 90_000);
  });
}
