import { describe, expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

// An error that llama-server sends inside a stream, after its 200: b10587 answers a task's
// first result as the status when it is an error, and any later error result as one
// `data: {"error":{"code","message","type"}}` event that ends the stream (server-context.cpp,
// the stream's next-chunk callback, "terminate on error"), the same object as the status answer
// (server-common.cpp format_error_response). The stand-in sends one with `error.mid_stream`.
// A request's fault must fail that chat alone, as the same error answered as a status does:
// a restart would fail every other chat on the server and spend the restart budget, so one
// hostile request could keep the server down for all.

describe("chat: an error event mid-stream", () => {
  test("invalid_request_error (400): bad_response as its status answer is; the server is not blamed", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const refused = { status: 400, message: "the request cannot be served" };
    h.llama.script(
      { content: ["partly"], error: { ...refused, mid_stream: true } },
      { error: refused },
      { content: ["next is fine"] },
    );
    const streamed = await h.chat(1, { input: "x", session_id: "s" });
    const answered = await h.chat(2, { input: "x", session_id: "a" });
    for (const { terminal, events } of [streamed, answered]) {
      expect(terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response", status: 400 },
      });
      expect(String(terminal.message)).toContain("the request cannot be served");
      expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "llm_error" });
    }
    expect(h.provider.failures).toEqual([]);
    expect(h.checkpoint("s")).toBeDefined();
    const next = await h.chat(3, { input: "again", session_id: "n" });
    expect(next.terminal.result).toMatchObject({ response: "next is fine" });
  });

  test("exceed_context_size_error: the turn's overflow handling, no restart", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({
      content: ["partly"],
      error: {
        status: 400,
        type: "exceed_context_size_error",
        message: "request exceeds the available context size",
        mid_stream: true,
      },
    });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "o" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow", n_ctx: 8192 },
    });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "context_overflow" });
    expect(h.provider.failures).toEqual([]);
  });

  // b10587 catches a grammar's throw per slot and releases it (server-context.cpp iterate,
  // "got exception: …", ERROR_TYPE_SERVER); a tool's schema can lead the model there
  // (ggml-org/llama.cpp#27619, on b10587). With return_progress it always comes mid-stream.
  test("a grammar's dead end (500 'Unexpected empty grammar stack'): that chat fails, no restart", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const message = 'got exception: Unexpected empty grammar stack after accepting piece: "} (92)';
    h.llama.script({ content: ["partly"], error: { status: 500, message, mid_stream: true } });
    const { terminal } = await h.chat(1, { input: "x", session_id: "g" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "bad_response", status: 500 },
    });
    expect(h.provider.failures).toEqual([]);
  });

  // b10587 fails one slot's image whose vision encoding or decoding fails (server-context.cpp,
  // "failed to process mtmd chunk", ERROR_TYPE_SERVER; the slot released, the server serving on).
  // Its encoder is warmed up on a small image (clip.cpp "avoid OOM on warmup"), so a large image
  // of a dynamic-resolution model grows the compute graph past the device's memory: the image's
  // cost, which a restart does not change, so a resent image would restart it again and again.
  test("an image the vision encoder fails (500 'failed to process mtmd chunk'): that chat fails, no restart", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const message = "failed to process mtmd chunk";
    h.llama.script(
      { content: ["partly"], error: { status: 500, message, mid_stream: true } },
      { error: { status: 500, message } },
    );
    for (const id of [1, 2]) {
      const { terminal } = await h.chat(id, { input: "x", session_id: `m${id}` });
      expect(terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response", status: 500 },
      });
      expect(String(terminal.message)).toContain(message);
    }
    expect(h.provider.failures).toEqual([]);
  });

  // b10587's decode finds no room in the KV cache even for one token (llama_decode 1 at n_batch 1:
  // server-context.cpp `decode`, err = "Context size has been exceeded."): it sends that to every
  // slot in flight with the default ERROR_TYPE_SERVER (a 500 "server_error"), clears and releases
  // them, and serves on. A stream always began by then (the slot's first partial sent the
  // headers), so it comes as an event; an embedding's comes as the status. The context is full,
  // not the server broken: a restart would change nothing and fail the other chats a second time.
  test("the KV cache full (500 'Context size has been exceeded.'): each chat fails by name, no restart", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const message = "Context size has been exceeded.";
    h.llama.script(
      { content: ["partly"], error: { status: 500, message, mid_stream: true } },
      { content: [], error: { status: 500, message, mid_stream: true } },
      { error: { status: 500, message } },
    );
    for (const id of [1, 2, 3]) {
      const { terminal, events } = await h.chat(id, { input: "x", session_id: `k${id}` });
      expect(terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response", status: 500, problem: "context_full" },
      });
      expect(String(terminal.message)).toContain(message);
      expect(String(terminal.message)).toContain("llama.parallel");
      expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "llm_error" });
    }
    expect(h.provider.failures).toEqual([]);
  });

  test("server_error (500): the server is blamed and restarted, as today", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({
      content: ["partly"],
      error: { status: 500, message: "Compute error.", mid_stream: true },
    });
    const { terminal } = await h.chat(1, { input: "x", session_id: "e" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "server_error", status: 500 },
    });
    expect(h.provider.failures).toHaveLength(1);
  });
});

// Builds before the `data: {"error": …}` event sent a later error result as an SSE field of its
// own, `error: {"code","message","type"}` (server.cpp, `server_sent_event(sink, "error", …)`): a
// field SSE does not know. Read as none, the error's text was lost and the stream's end blamed
// the server (connection_lost, a restart); before any event it was "not an event stream".
describe("chat: an `error:` field mid-stream (an older llama-server)", () => {
  const line = (error: Record<string, unknown>) => `error: ${JSON.stringify(error)}\n\n`;
  const delta = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "partly" }, finish_reason: null }] })}\n\n`;
  for (const [when, before] of [
    ["after a token", [delta]],
    ["before any event", []],
  ] as const) {
    test(`${when}: classified as the same error event would be, its text kept, no restart`, async () => {
      await using h = new ChatHarness({ agents: [{ name: "plain" }] });
      h.llama.script(
        {
          raw: [
            ...before,
            line({ code: 400, message: "the request cannot be served", type: "invalid_request_error" }),
          ],
        },
        {
          raw: [
            ...before,
            line({
              code: 400,
              message: "request exceeds the available context size",
              type: "exceed_context_size_error",
              n_ctx: 8192,
            }),
          ],
        },
      );
      const refused = await h.chat(1, { input: "x", session_id: "s" });
      expect(refused.terminal).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { reason: "bad_response", status: 400 },
      });
      expect(String(refused.terminal.message)).toContain("the request cannot be served");
      const overflow = await h.chat(2, { input: "x", session_id: "o" });
      expect(overflow.terminal).toMatchObject({
        code: "invalid_request",
        data: { reason: "context_overflow" },
      });
      expect(h.provider.failures).toEqual([]);
    });
  }

  test("one whose value is no JSON object is a field of no meaning: before any event, no event stream", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ raw: ["error: not json\n\n"] }, { raw: ["error: 7\n\n"] });
    for (const id of [1, 2]) {
      const { terminal } = await h.chat(id, { input: "x", session_id: `n${id}` });
      expect(terminal).toMatchObject({ type: "error", data: { reason: "bad_response" } });
      expect(String(terminal.message)).toContain("not an event stream");
    }
    expect(h.provider.failures).toEqual([]);
  });

  test("after [DONE] it is nothing: the reply finished", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const finish = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`;
    // One write, so that the field is parsed in the read that ended the reply.
    h.llama.script({ raw: [`${delta}${finish}data: [DONE]\n\n${line({ code: 500, message: "late" })}`] });
    const { terminal } = await h.chat(1, { input: "x", session_id: "d" });
    expect(terminal).toMatchObject({ type: "result", result: { response: "partly" } });
  });
});
