import { describe, expect, test } from "bun:test";
import { waitFor } from "../fixtures/wait.ts";
import { FORMS, perTest, type RunningStandIn } from "./forms.ts";
import { sseEvents } from "./transcript.ts";

// Each of llama-server's behaviours the stand-in models, checked in both forms it is served in
// (in the test process, and as the subprocess the supervisor spawns), each test naming the
// recording in test/fixtures/llama-server/transcripts it comes from.

type Json = Record<string, any>;

for (const form of FORMS) {
  describe(`llama-server stand-in (${form.name})`, () => {
    const { start, call } = perTest(form);
    const chat = (s: RunningStandIn, body: unknown, signal?: AbortSignal) =>
      call(s, "/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
        signal,
      });
    const user = (content: string) => [{ role: "user", content }];
    const chunks = async (res: Response) =>
      sseEvents(await res.text()).map((e) => (e === "[DONE]" ? e : (JSON.parse(e) as Json)));

    test("every route answers 503 Loading model until the model is loaded, then /health 200 (transcripts 01, 02, 03)", async () => {
      const s = await start({ loading: true });
      for (const path of ["/health", "/v1/models", "/props"]) {
        const res = await fetch(`${s.baseUrl}${path}`);
        expect(res.status).toBe(503);
        expect(await res.json()).toEqual({
          error: { message: "Loading model", type: "unavailable_error", code: 503 },
        });
      }
      s.finishLoading();
      let status = 0;
      const deadline = Date.now() + 10_000;
      while (status !== 200 && Date.now() < deadline) status = (await fetch(`${s.baseUrl}/health`)).status; // poll /health, not the port
      expect(status).toBe(200);
      for (const path of ["/health", "/v1/health"]) {
        const res = await fetch(`${s.baseUrl}${path}`);
        expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
        expect(await res.json()).toEqual({ status: "ok" });
      }
    });

    test("a missing or wrong key is 401 authentication_error; Bearer and X-Api-Key pass; /health stays public (transcript 76)", async () => {
      const s = await start();
      const bad = { error: { message: "Invalid API Key", type: "authentication_error", code: 401 } };
      for (const headers of [{}, { Authorization: "Bearer wrong" }] as Record<string, string>[]) {
        const res = await fetch(`${s.baseUrl}/v1/models`, { headers });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual(bad);
      }
      expect((await fetch(`${s.baseUrl}/props`)).status).toBe(401);
      expect((await fetch(`${s.baseUrl}/v1/models`, { headers: { "X-Api-Key": s.apiKey } })).status).toBe(
        200,
      );
      expect((await call(s, "/v1/models")).status).toBe(200);
      expect((await fetch(`${s.baseUrl}/health`)).status).toBe(200);
      expect((await fetch(`${s.baseUrl}/v1/health`)).status).toBe(200);
    });

    test("/props reports the slots and the context per slot (transcript 04)", async () => {
      const s = await start({ nCtx: 1024, slots: 3 });
      const props = (await (await call(s, "/props")).json()) as Json;
      expect(props.total_slots).toBe(3);
      expect(props.default_generation_settings.n_ctx).toBe(1024);
      expect(props.build_info).toBe("b10587-3f545becc");
    });

    test("a stream: data: <json> framing, the role delta first, a delta per token, finish_reason with timings, [DONE] (transcript 11)", async () => {
      const s = await start({ script: [{ content: "alpha beta gamma" }] });
      const res = await chat(s, { messages: user("hi"), stream: true });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      expect(res.headers.get("x-accel-buffering")).toBe("no");
      const ev = await chunks(res);
      expect(ev.at(-1)).toBe("[DONE]");
      const [first, ...rest] = ev.slice(0, -1) as Json[];
      expect(first?.choices).toEqual([
        { finish_reason: null, index: 0, delta: { role: "assistant", content: null } },
      ]);
      expect(first?.object).toBe("chat.completion.chunk");
      const finish = rest.pop() as Json;
      expect(rest.map((c) => c.choices[0].delta.content)).toEqual(["alpha", " beta", " gamma"]);
      expect(finish.choices).toEqual([{ finish_reason: "stop", index: 0, delta: {} }]);
      expect(finish.timings.predicted_n).toBe(3);
      expect(finish.usage).toBeUndefined();
    });

    test("include_usage: a usage chunk with empty choices comes before [DONE], the timings move to it (transcript 12)", async () => {
      const s = await start({ script: [{ content: ["a", "b", "c", "d", "e"] }] });
      const ev = await chunks(
        await chat(s, {
          messages: user("hi"),
          max_tokens: 4,
          stream: true,
          stream_options: { include_usage: true },
        }),
      );
      const usage = ev.at(-2) as Json;
      const finish = ev.at(-3) as Json;
      expect(usage.choices).toEqual([]);
      expect(usage.usage).toMatchObject({ completion_tokens: 4 });
      expect(Object.keys(usage.usage)).toEqual([
        "completion_tokens",
        "prompt_tokens",
        "total_tokens",
        "prompt_tokens_details",
      ]);
      expect(usage.timings).toBeDefined();
      // max_tokens reached: "length", as the real server says even when the text could have ended there.
      expect(finish.choices[0].finish_reason).toBe("length");
      expect(finish.timings).toBeUndefined();
    });

    test("tool calls stream as fragments: index, id, type and name first, then argument pieces; finish_reason tool_calls (transcript 16)", async () => {
      const args = '{"city":"Paris"}';
      const s = await start({ script: [{ tool_calls: [{ name: "get_weather", arguments: args }] }] });
      const ev = (await chunks(await chat(s, { messages: user("weather?"), stream: true }))).slice(
        0,
        -1,
      ) as Json[];
      const calls = ev.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
      expect(calls.length).toBeGreaterThan(3);
      expect(Object.keys(calls[0])).toEqual(["index", "id", "type", "function"]);
      expect(calls[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
      expect(calls[0].id).toMatch(/^[A-Za-z0-9]{32}$/);
      for (const more of calls.slice(1)) expect(Object.keys(more)).toEqual(["index", "function"]);
      expect(calls.map((c: Json) => c.function.arguments).join("")).toBe(args);
      expect(ev.at(-1)?.choices[0].finish_reason).toBe("tool_calls");
    });

    test('without stream: one chat.completion with message, usage and timings; a tool call has content "" (transcripts 10, 15)', async () => {
      const s = await start({
        script: [
          { content: "one two" },
          { tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }] },
        ],
      });
      const plain = await chat(s, { messages: user("hi") });
      expect(plain.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const a = (await plain.json()) as Json;
      expect(a.object).toBe("chat.completion");
      expect(a.choices[0]).toEqual({
        finish_reason: "stop",
        index: 0,
        message: { role: "assistant", content: "one two" },
      });
      expect(a.usage.completion_tokens).toBe(2);
      expect(a.timings.predicted_n).toBe(2);
      const b = (await (await chat(s, { messages: user("weather?") })).json()) as Json;
      expect(b.choices[0].finish_reason).toBe("tool_calls");
      expect(b.choices[0].message).toMatchObject({
        role: "assistant",
        content: "",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      });
    });

    test("a prompt over the context is 400 exceed_context_size_error with n_prompt_tokens and n_ctx, and no SSE even for a stream (transcripts 22, 22b)", async () => {
      const s = await start({ nCtx: 2048 });
      for (const stream of [false, true]) {
        const res = await chat(s, { messages: user("hello world ".repeat(1500)), stream });
        expect(res.status).toBe(400);
        expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
        const { error } = (await res.json()) as Json;
        expect(Object.keys(error).sort()).toEqual(["code", "message", "n_ctx", "n_prompt_tokens", "type"]);
        expect(error).toMatchObject({ code: 400, type: "exceed_context_size_error", n_ctx: 2048 });
        expect(error.n_prompt_tokens).toBeGreaterThan(2048);
        expect(error.message).toContain("exceeds the available context size (2048 tokens)");
      }
    });

    test("a reply that fills the slot's context ends with finish_reason length at n_ctx tokens (transcripts 23, 23b)", async () => {
      const long = "word ".repeat(3000);
      const s = await start({ nCtx: 2048, script: [{ content: long }, { content: long }] });
      const prompt = user("hello world ".repeat(900));
      const plain = (await (await chat(s, { messages: prompt, max_tokens: 100_000 })).json()) as Json;
      expect(plain.choices[0].finish_reason).toBe("length");
      expect(plain.usage.total_tokens).toBe(2048);
      const ev = await chunks(
        await chat(s, { messages: prompt, stream: true, stream_options: { include_usage: true } }),
      );
      const usage = ev.at(-2) as Json;
      expect((ev.at(-3) as Json).choices[0].finish_reason).toBe("length");
      expect(usage.usage.total_tokens).toBe(2048);
      expect(usage.usage.completion_tokens).toBeGreaterThan(0);
    });

    test("malformed or empty JSON is a 500 server_error, not a 400 (transcripts 20, 20c)", async () => {
      const s = await start();
      for (const body of ['{"messages": [{"role": "user", "content": "hi"}', ""]) {
        const res = await chat(s, body);
        expect(res.status).toBe(500);
        const { error } = (await res.json()) as Json;
        expect(error).toMatchObject({ code: 500, type: "server_error" });
        expect(error.message).toContain("[json.exception.parse_error.101]");
      }
    });

    test("missing messages, messages not an array, a mistyped max_tokens: 400 invalid_request_error (transcripts 21, 21c, 21e)", async () => {
      const s = await start();
      const cases: [unknown, string][] = [
        [{ max_tokens: 4 }, "'messages' is required"],
        [{ messages: "hello", max_tokens: 4 }, "Expected 'messages' to be an array"],
        [{ messages: user("hi"), max_tokens: "lots" }, "type must be number, but is string"],
      ];
      for (const [body, message] of cases) {
        const res = await chat(s, body);
        expect(res.status).toBe(400);
        const { error } = (await res.json()) as Json;
        expect(error.type).toBe("invalid_request_error");
        expect(error.message).toContain(message);
      }
    });

    test("an unknown route and a known route with the wrong method are 404 File Not Found, never 405 (transcripts 24, 24b, 25, 25b, 25c)", async () => {
      const s = await start();
      const notFound = { error: { message: "File Not Found", type: "not_found_error", code: 404 } };
      const cases: [string, string][] = [
        ["GET", "/v1/nope"],
        ["POST", "/v1/nope"],
        ["GET", "/v1/chat/completions"],
        ["DELETE", "/health"],
        ["POST", "/health"],
      ];
      for (const [method, path] of cases) {
        const res = await call(s, path, { method, body: method === "POST" ? "{}" : undefined });
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual(notFound);
      }
    });

    test("a client that disconnects mid-stream stops the generation (transcript 40)", async () => {
      const s = await start({ script: [{ content: "word ".repeat(500), chunk_delay_ms: 5 }] });
      const abort = new AbortController();
      const res = await chat(s, { messages: user("go"), stream: true }, abort.signal);
      await (res.body as ReadableStream<Uint8Array>).getReader().read();
      abort.abort();
      expect(await waitFor(() => s.cancelled() === 1)).toBe(true);
    });

    test("a crash mid-stream drops the connection without finish_reason or [DONE] (transcript 83)", async () => {
      const s = await start({ script: [{ content: "one two three four", crash_after_chunks: 2 }] });
      // The connection breaks wherever the bytes were when the process died: the headers
      // may not even have left.
      const text = await chat(s, { messages: user("go"), stream: true })
        .then((res) => res.text())
        .catch((e: Error) => `(connection dropped: ${e.message})`);
      expect(text).not.toContain("[DONE]");
      expect(text).not.toContain('"finish_reason":"stop"');
      if (form.name === "subprocess") {
        expect(await waitFor(() => s.exit() !== undefined)).toBe(true);
        expect(s.exit()?.signal).toBe("SIGKILL");
      }
    });

    test("a wedged server (a hang turn with nothing to send) never answers, not even the headers", async () => {
      const s = await start({ script: [{ hang: true }] });
      const err = await chat(s, { messages: user("go"), stream: true }, AbortSignal.timeout(300)).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.name).toBe("TimeoutError");
    });

    test("requests beyond the slots wait for a free one", async () => {
      const s = await start({ slots: 1, script: [{ content: ["held"], hang: true }, { content: "next" }] });
      const abort = new AbortController();
      const first = await chat(s, { messages: user("one"), stream: true }, abort.signal);
      await (first.body as ReadableStream<Uint8Array>).getReader().read();
      let answered = false;
      const second = chat(s, { messages: user("two") }).then(async (r) => {
        answered = true;
        return (await r.json()) as Json;
      });
      // Nothing to wait on for "still queued": give the second request time to (wrongly) pass.
      await Bun.sleep(200);
      expect(answered).toBe(false);
      abort.abort(); // the first client leaves; its slot frees
      expect((await second).choices[0].message.content).toBe("next");
    });
  });
}
