import { describe, expect, test } from "bun:test";
import {
  eventError,
  isUnparsedReply,
  LlmError,
  MAX_SERVER_MESSAGE_CHARS,
  responseError,
  statusError,
} from "../../src/llama/errors.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readExchanges, readTranscript } from "../contract/transcript.ts";

// llama-server's error answers, as recorded, mapped to the client's kinds: the status alone
// does not say whose fault it was (its JSON parser answers 500), the body's type does.

const recorded = (file: string, exchange = 0) => {
  const t = exchange === 0 ? readTranscript(RECORDINGS, file) : readExchanges(RECORDINGS, file)[exchange]!;
  return statusError(t.status, "", t.body);
};

describe("recorded error bodies", () => {
  test("22-err-context-overflow.txt: context_overflow with the token counts, whatever the key order", () => {
    const err = recorded("22-err-context-overflow.txt");
    expect(err).toMatchObject({ kind: "context_overflow", status: 400, type: "exceed_context_size_error" });
    expect(err.data).toEqual({ n_prompt_tokens: 3210, n_ctx: 2048 });
  });

  // The counts go on into an embed's error as they are (server/embed-failure.ts spreads the data):
  // a server's 60 KB string or nested arrays there reached the host where a number belongs.
  test("an overflow's counts are kept only when they are numbers", () => {
    const junk = JSON.stringify({
      error: {
        code: 400,
        type: "exceed_context_size_error",
        message: "m",
        n_prompt_tokens: "9".repeat(60_000),
        n_ctx: [[[2048]]],
      },
    });
    const err = statusError(400, "", junk);
    expect(err.kind).toBe("context_overflow");
    expect(err.data).toEqual({ n_prompt_tokens: undefined, n_ctx: undefined });
    const event = eventError(
      { code: 400, type: "exceed_context_size_error", n_ctx: "x", n_prompt_tokens: 7 },
      "m",
    );
    expect(event.data).toEqual({ n_prompt_tokens: 7, n_ctx: undefined });
  });

  test("20-err-malformed-json.txt, 20c-err-empty-body.txt, 91g-reasoning-in-history-null.txt: a 500 from the JSON parser is the request's fault, not the server's", () => {
    for (const file of [
      "20-err-malformed-json.txt",
      "20c-err-empty-body.txt",
      "91g-reasoning-in-history-null.txt",
    ]) {
      const err = recorded(file);
      expect(err.kind).toBe("bad_response");
      expect(err.status).toBe(500);
      expect(err.data).toEqual({ status: 500 });
      expect(err.message).toContain("[json.exception.");
    }
  });

  // b10587 catches the grammar's throw per slot (server-context.cpp iterate: "got exception: …",
  // ERROR_TYPE_SERVER, the slot released, the server serving on); a tool's schema or a
  // response_format can lead the model there (ggml-org/llama.cpp#27619, on b10587).
  test("a grammar's dead end (a 500 'got exception: Unexpected empty grammar stack') is the request's fault, not the server's", () => {
    const body = JSON.stringify({
      error: {
        code: 500,
        message: 'got exception: Unexpected empty grammar stack after accepting piece: "} (92)',
        type: "server_error",
      },
    });
    const err = statusError(500, "", body);
    expect(err).toMatchObject({ kind: "bad_response", status: 500, data: { status: 500 } });
    const other = statusError(
      500,
      "",
      JSON.stringify({ error: { code: 500, message: "got exception: boom" } }),
    );
    expect(other.kind).toBe("server_error");
    // The words quoted inside another failure's message are not that failure: it stays the server's.
    for (const message of [
      'got exception: std::bad_alloc while logging "Unexpected empty grammar stack after accepting piece"',
      "Compute error. (after: failed to process mtmd chunk)",
    ]) {
      const quoted = statusError(500, "", JSON.stringify({ error: { code: 500, message } }));
      expect(quoted.kind).toBe("server_error");
    }
  });

  // b10587's decode with no room left in the KV cache sends this to every slot in flight as
  // ERROR_TYPE_SERVER and serves on (server-context.cpp `decode`): the context is full, the
  // server is not broken, so nothing should restart it.
  test("'Context size has been exceeded.' (a 500 server_error): the context is full, not the server failed", () => {
    const message = "Context size has been exceeded.";
    const err = statusError(500, "", JSON.stringify({ error: { code: 500, message, type: "server_error" } }));
    expect(err).toMatchObject({ kind: "bad_response", status: 500, type: "server_error" });
    expect(err.data).toEqual({ status: 500, problem: "context_full" });
    expect(err.message).toContain(message);
    const quoted = statusError(
      500,
      "",
      JSON.stringify({ error: { code: 500, message: `Compute error. ${message}` } }),
    );
    expect(quoted.kind).toBe("server_error");
  });

  test("quirks/90: a finished reply llama-server cannot parse is the model's slip, not the server's: bad_response, unparsed_reply", () => {
    const err = recorded("quirks/90-invalid-utf8-output-500-chat.txt");
    expect(err).toMatchObject({ kind: "bad_response", status: 500 });
    expect(err.data).toEqual({ problem: "unparsed_reply" });
    expect(isUnparsedReply(err)).toBe(true);
    expect(isUnparsedReply(recorded("20-err-malformed-json.txt"))).toBe(false);
  });

  test("21-err-missing-messages.txt, 21c, 21e: a 400 invalid_request_error is bad_response with the server's message", () => {
    const err = recorded("21-err-missing-messages.txt");
    expect(err).toMatchObject({ kind: "bad_response", status: 400, type: "invalid_request_error" });
    expect(err.message).toBe("llama-server answered HTTP 400: 'messages' is required");
    expect(recorded("21c-err-messages-not-array.txt").kind).toBe("bad_response");
    expect(recorded("21e-err-bad-param-type.txt").kind).toBe("bad_response");
  });

  test("24-err-unknown-endpoint.txt and 76-api-key.txt (the other key order): 404 and 401 are bad_response", () => {
    expect(recorded("24-err-unknown-endpoint.txt")).toMatchObject({
      kind: "bad_response",
      type: "not_found_error",
    });
    expect(recorded("76-api-key.txt", 1)).toMatchObject({
      kind: "bad_response",
      status: 401,
      type: "authentication_error",
      message: "llama-server answered HTTP 401: Invalid API Key",
    });
  });

  test("01-health-during-startup.txt: 503 Loading model is server_error", () => {
    const body = '{"error":{"message":"Loading model","type":"unavailable_error","code":503}}';
    expect(statusError(503, "Service Unavailable", body)).toMatchObject({
      kind: "server_error",
      status: 503,
    });
  });
});

describe("bodies that are not llama-server's error JSON", () => {
  test("the text (bounded) or the status text is the message", async () => {
    expect(statusError(502, "Bad Gateway", "").message).toBe("llama-server answered HTTP 502: Bad Gateway");
    const long = statusError(500, "", "x".repeat(1000));
    expect(long.kind).toBe("server_error");
    expect(long.message.length).toBeLessThan(400);
    const res = new Response("nope", { status: 418 });
    const err = await responseError(res);
    expect(err).toBeInstanceOf(LlmError);
    expect(err).toMatchObject({ kind: "bad_response", data: { status: 418 } });
  });

  // The error of any call but the streamed chat's (/props, /tokenize, /v1/embeddings, a slot's)
  // was read whole before its first characters were looked at: a server answering a 500 with an
  // endless body (a broken proxy, a hostile program on the port) filled the core's memory at
  // loopback speed, gigabytes before any deadline fired. Its message is in its first characters.
  test("an error body that never ends is read no further than its bound", async () => {
    let sent = 0;
    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 64 * 1024 * 1024) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const err = await responseError(new Response(body, { status: 500 }));
    expect(err).toMatchObject({ kind: "server_error", data: { status: 500 } });
    expect(err.message).toContain("xxxx");
    expect(sent).toBeLessThan(1024 * 1024);
  });

  // Recorded messages are under 300 characters (transcripts/20d quotes the body around a lone
  // surrogate); a body's own message of 60 KB (its bound, stream-socket.ts) went to the host whole.
  test("llama-server's own message is cut too, between characters", () => {
    const body = JSON.stringify({ error: { code: 400, message: `${"q".repeat(60_000)}😀`, type: "x" } });
    const err = statusError(400, "Bad Request", body);
    expect(err.kind).toBe("bad_response");
    expect(err.message.length).toBeLessThan(MAX_SERVER_MESSAGE_CHARS + 100);
    expect(err.message).toContain("q".repeat(500));
    expect(err.message.isWellFormed()).toBe(true);
  });

  // A status line's reason is the server's text too, up to the head's 64 KiB (stream-socket.ts):
  // with an empty body it went to the host's error whole.
  test("a status line's reason phrase, the message of an empty body, is cut as a body's text is", () => {
    const err = statusError(500, "r".repeat(60_000), "");
    expect(err.kind).toBe("server_error");
    expect(err.message.length).toBeLessThan(400);
    expect(err.message).toContain("rrrr");
  });

  // The message reaches the host in the chat's error: half an emoji there makes a line a strict
  // JSON parser refuses whole.
  test("the message is text: a body cut inside an emoji, or an escaped lone surrogate, leaves no half", () => {
    const page = statusError(502, "Bad Gateway", `${"x".repeat(299)}😀 proxy down`);
    expect(page.message.isWellFormed()).toBe(true);
    expect(page.message).toContain("x".repeat(299));
    const escaped = statusError(500, "", '{"error":{"code":500,"message":"bad \\ud83d here"}}');
    expect(escaped.message).toBe("llama-server answered HTTP 500: bad \ufffd here");
  });

  test("413 (cpp-httplib's 100 MiB body cap, an empty body) says the request was too large", () => {
    const err = statusError(413, "Payload Too Large", "");
    expect(err).toMatchObject({
      kind: "bad_response",
      status: 413,
      data: { status: 413, problem: "too_large" },
    });
    expect(err.message).toBe("llama-server refused the request as too large (HTTP 413: Payload Too Large)");
  });
});
