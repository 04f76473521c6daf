import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, waitFor } from "./helpers/harness.ts";

// The stand-in as the supervisor runs it (a subprocess on the real flags), checked against what
// the recordings show; test/contract/ checks each behaviour in both forms.
describe.skipIf(process.platform === "win32")("llama-server stand-in under the supervisor", () => {
  const dir = tmpdir();
  const script = join(dir.path, "script.json");
  const requests = join(dir.path, "requests.jsonl");
  writeFileSync(
    script,
    JSON.stringify([
      { tool_calls: [{ name: "files.read", arguments: '{"path": "a.txt"}' }] },
      { content: "alpha beta gamma" },
      { error: { status: 400, message: "scripted", type: "invalid_request_error" } },
    ]),
  );
  const h = makeSupervisor(dir.path, {
    slots: 2,
    env: { FAKE_LLAMA_SCRIPT: script, FAKE_LLAMA_REQUEST_LOG: requests },
  });
  let lease: LlamaLease;
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${lease.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${lease.apiKey}`, ...headers },
      body,
    });
  const events = async (res: Response) =>
    (await res.text())
      .split("\n\n")
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ""));

  beforeAll(async () => {
    lease = await h.supervisor.acquire(new AbortController().signal);
  });
  afterAll(async () => {
    lease.release();
    await h.supervisor.stop();
    dir[Symbol.dispose]();
  });

  test("scripted tool call streams as fragments with finish_reason tool_calls, then [DONE] (transcript 16)", async () => {
    const res = await post(JSON.stringify({ messages: [{ role: "user", content: "read" }], stream: true }));
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const ev = await events(res);
    expect(ev.at(-1)).toBe("[DONE]");
    const chunks = ev.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: null });
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(calls.length).toBeGreaterThan(3);
    expect(calls[0].function.name).toBe("files.read");
    expect(calls.map((c: { function: { arguments: string } }) => c.function.arguments).join("")).toBe(
      '{"path": "a.txt"}',
    );
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
    expect(chunks.at(-1).timings).toBeDefined();
  });

  test("content deltas per word; include_usage adds a usage chunk before [DONE] (transcripts 11, 12)", async () => {
    const ev = await events(
      await post(
        JSON.stringify({
          messages: [{ role: "user", content: "x" }],
          stream: true,
          stream_options: { include_usage: true },
        }),
      ),
    );
    const chunks = ev.slice(0, -1).map((e) => JSON.parse(e));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe("alpha beta gamma");
    expect(chunks.at(-1).choices).toEqual([]);
    expect(chunks.at(-1).usage.completion_tokens).toBe(3);
    expect(chunks.at(-2).choices[0].finish_reason).toBe("stop");
  });

  test("scripted error, then the default reply; requests are logged", async () => {
    const err = await post(JSON.stringify({ messages: [] }));
    expect(err.status).toBe(400);
    const ok = await post(JSON.stringify({ messages: [{ role: "user", content: "ping" }] }));
    const body = (await ok.json()) as {
      object: string;
      choices: { message: { content: string }; finish_reason: string }[];
    };
    expect(body.object).toBe("chat.completion");
    expect(body.choices[0]?.message.content).toBe("You said: ping");
    const logged = readFileSync(requests, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(logged.at(-1).messages[0].content).toBe("ping");
  });

  test("errors with the recorded status codes and bodies (transcripts 20, 21, 22b, 24, 25, 76)", async () => {
    expect((await post('{"messages": [')).status).toBe(500);
    const missing = await post(JSON.stringify({ max_tokens: 4 }));
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toBe(
      "'messages' is required",
    );
    const huge = await post(
      JSON.stringify({ messages: [{ role: "user", content: "hello world ".repeat(4000) }], stream: true }),
    );
    expect(huge.status).toBe(400);
    const overflow = (await huge.json()) as {
      error: { type: string; n_ctx: number; n_prompt_tokens: number };
    };
    expect(overflow.error.type).toBe("exceed_context_size_error");
    // -c is 2 slots × 2048, and the stand-in's KV cache is unified as llama-server's default is.
    expect(overflow.error.n_ctx).toBe(4096);
    expect(overflow.error.n_prompt_tokens).toBeGreaterThan(4096);
    expect(
      (await fetch(`${lease.baseUrl}/v1/nope`, { headers: { Authorization: `Bearer ${lease.apiKey}` } }))
        .status,
    ).toBe(404);
    expect(
      (
        await fetch(`${lease.baseUrl}/v1/chat/completions`, {
          headers: { Authorization: `Bearer ${lease.apiKey}` },
        })
      ).status,
    ).toBe(404);
    const noKey = await fetch(`${lease.baseUrl}/props`);
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    const props = (await (
      await fetch(`${lease.baseUrl}/props`, { headers: { "X-Api-Key": lease.apiKey } })
    ).json()) as {
      total_slots: number;
    };
    expect(props.total_slots).toBe(2);
  });

  test("a client disconnect stops generation (transcript 40)", async () => {
    writeFileSync(script, "[]");
    const abort = new AbortController();
    const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${lease.apiKey}` },
      body: JSON.stringify({ messages: [{ role: "user", content: "word ".repeat(500) }], stream: true }),
      signal: abort.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    abort.abort();
    expect(await waitFor(() => h.supervisor.tail.last().some((l) => l.includes("stop: cancel task")))).toBe(
      true,
    );
  });
});
