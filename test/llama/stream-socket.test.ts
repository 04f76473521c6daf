import { afterEach, describe, expect, test } from "bun:test";
import { ConnectionRefused, LlmError } from "../../src/llama/errors.ts";
import { ANSWER_LIMITS, type BodyReader, chunkSize, postStream } from "../../src/llama/stream-socket.ts";
import { clientReads, closeScripted, scripted, stepped } from "./scripted-server.ts";

// The streamed completion's own HTTP/1.1 read (docs/performance.md, "Where a streamed piece's
// CPU goes"): every framing, answers cut anywhere, error statuses, aborts, big requests.
afterEach(closeScripted);

async function all(reader: BodyReader): Promise<string> {
  let text = "";
  for (let t = await reader.read(); t !== undefined; t = await reader.read()) text += t;
  return text;
}

const never = new AbortController().signal;
const OK_CHUNKED = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

describe("postStream", () => {
  test("a chunked body, its size lines, data and CRLFs split anywhere, multi-byte characters across reads", async () => {
    const body = 'data: {"x":"é😀"}\n\n';
    const bytes = Buffer.from(body);
    const size = bytes.length.toString(16);
    const raw = Buffer.concat([
      Buffer.from(`${OK_CHUNKED}${size};ext=1\r\n`),
      bytes,
      Buffer.from("\r\n0\r\n\r\n"),
    ]).toString("latin1");
    // One byte per write in the middle: every boundary lands inside something.
    const writes = [raw.slice(0, 20), ...raw.slice(20).split("")];
    const s = await scripted(writes, { gapMs: 0 });
    const reader = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/v1/chat/completions", "{}", never);
    expect(await all(reader)).toBe(body);
  });

  test("Content-Length and read-to-close bodies; the request carries the key, the type and the whole body", async () => {
    const big = JSON.stringify({ messages: ["x".repeat(3_000_000)] });
    const s = await scripted(["HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "lo"], { end: false });
    expect(await all(await postStream({ baseUrl: s.baseUrl, apiKey: "k1" }, "/p", big, never))).toBe("hello");
    const asked = await s.request;
    expect(asked.startsWith("POST /p HTTP/1.1\r\n")).toBe(true);
    expect(asked).toContain("Authorization: Bearer k1\r\n");
    expect(asked).toContain("Content-Type: application/json\r\n");
    expect(asked.endsWith(big)).toBe(true);
    closeScripted();
    const c = await scripted(["HTTP/1.0 200 OK\r\n\r\nto the ", "close"]);
    expect(await all(await postStream({ baseUrl: c.baseUrl, apiKey: "k" }, "/p", "{}", never))).toBe(
      "to the close",
    );
  });

  test("an error status is its LlmError, with the body's message", async () => {
    const msg = JSON.stringify({
      error: {
        code: 400,
        message: "the request exceeds the available context size",
        type: "exceed_context_size_error",
        n_prompt_tokens: 5000,
        n_ctx: 4096,
      },
    });
    const s = await scripted([
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${msg.length}\r\n\r\n`,
      msg,
    ]);
    const err = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect(err).toBeInstanceOf(LlmError);
    expect((err as LlmError).status).toBe(400);
  });

  test("what arrived over several network reads while nobody read is one piece; then the next", async () => {
    // Each piece written once the last was read off the socket: timed gaps raced a sleep of the
    // test's, and on a loaded box c came after it (or a and b in one read).
    const s = await stepped();
    using reads = clientReads();
    const answer = postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never);
    await s.write(OK_CHUNKED);
    const reader = await answer;
    for (const piece of ["1\r\na\r\n", "1\r\nb\r\n", "1\r\nc\r\n"]) {
      const read = reads.next();
      await s.write(piece);
      await read;
    }
    expect(await reader.read()).toBe("abc");
    await s.write("1\r\nd\r\n0\r\n\r\n");
    s.end();
    expect(await reader.read()).toBe("d");
    expect(await reader.read()).toBeUndefined();
  });

  test("cut mid-chunk, or before the head, is connection_lost", async () => {
    const s = await scripted([`${OK_CHUNKED}20\r\ndata: partial`]);
    const reader = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never);
    const err = await all(reader).catch((e) => e);
    expect((err as LlmError).kind).toBe("connection_lost");
    closeScripted();
    const h = await scripted(["HTTP/1.1 200 O"]);
    const early = await postStream({ baseUrl: h.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect((early as LlmError).kind).toBe("connection_lost");
  });

  // The status line said what happened: an error body cut short is still that error, as the
  // fetched calls read it (errors.ts errorText), not a lost connection that blames the server.
  test("an error status whose body is cut mid-chunk, or reset, is still the server's error", async () => {
    const msg =
      '{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}';
    const head =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    const s = await scripted([`${head}${msg.length.toString(16)}\r\n${msg.slice(0, 40)}`]);
    const err = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect((err as LlmError).kind).toBe("bad_response");
    expect((err as LlmError).status).toBe(400);
    closeScripted();
    const full = await scripted([`${head}${msg.length.toString(16)}\r\n${msg}\r\n`]);
    const whole = await postStream({ baseUrl: full.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect((whole as LlmError).kind).toBe("context_overflow");
    closeScripted();
    const bad = await scripted([
      `HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
    ]);
    const unavailable = await postStream({ baseUrl: bad.baseUrl, apiKey: "k" }, "/p", "{}", never).catch(
      (e) => e,
    );
    expect((unavailable as LlmError).kind).toBe("server_error");
    expect((unavailable as LlmError).status).toBe(503);
  });

  // An error body whole in the read that then turns malformed was dropped with that read: the
  // overflow's 400 (its type as in transcripts/22b) became a bare bad_response, not context_overflow.
  test("an error status's body read before its framing turns malformed still names the error", async () => {
    const msg =
      '{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}';
    const head =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    const s = await scripted([`${head}${msg.length.toString(16)}\r\n${msg}\r\nzz\r\n`]);
    const err = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect((err as LlmError).kind).toBe("context_overflow");
  });

  test("size lines in upper and lower case hex are read; one with no hex digits is a malformed body", async () => {
    const pieces = ["data: one\n\n", `data: ${"x".repeat(250)}\n\n`];
    const framed = pieces.map((p, i) => {
      const hex = p.length.toString(16);
      return `${i === 0 ? hex.toLowerCase() : hex.toUpperCase()}\r\n${p}\r\n`;
    });
    const s = await scripted([OK_CHUNKED, ...framed, "0\r\n\r\n"]);
    const reader = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never);
    expect(await all(reader)).toBe(pieces.join(""));
    closeScripted();
    const bad = await scripted([OK_CHUNKED, "zz\r\ndata: x\n\n\r\n"]);
    const badReader = await postStream({ baseUrl: bad.baseUrl, apiKey: "k" }, "/p", "{}", never);
    const err = await all(badReader).catch((e) => e);
    expect((err as LlmError).kind).toBe("connection_lost");
    expect((err as LlmError).message).toContain("malformed chunked body");
  });

  test("nothing listening is ConnectionRefused", async () => {
    const s = await scripted([]);
    closeScripted();
    await Bun.sleep(10);
    const err = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectionRefused);
  });

  test("an abort mid-stream rejects the read with the reason and closes the connection at once", async () => {
    const pieces = Array.from(
      { length: 200 },
      (_, i) => `${(8).toString(16)}\r\npiece${String(i).padStart(3, "0")}\r\n`,
    );
    const s = await scripted([OK_CHUNKED, ...pieces], { gapMs: 5 });
    const cancel = new AbortController();
    const reader = await postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", cancel.signal);
    expect(await reader.read()).toBeString();
    const reason = new Error("cancelled by the host");
    const pending = reader.read();
    cancel.abort(reason);
    expect(await pending.catch((e) => e)).toBe(reason);
    await Promise.race([s.closed, Bun.sleep(1000).then(() => Promise.reject(new Error("still open")))]);
  });
});

describe("postStream's bounds: what would grow without end is refused at its limit", () => {
  /** The answer's failure, or "nothing" when none came within 2 s (an unbounded wait). */
  async function outcome(writes: string[], read = false): Promise<unknown> {
    const s = await scripted(writes, { end: false, gapMs: 0 });
    const answer = postStream({ baseUrl: s.baseUrl, apiKey: "k" }, "/p", "{}", never).then(
      (r): Promise<unknown> | BodyReader => (read ? all(r) : r),
    );
    return Promise.race([answer.catch((e) => e), Bun.sleep(2000).then(() => "nothing")]);
  }

  test("a head that never ends", async () => {
    const err = await outcome([
      "HTTP/1.1 200 OK\r\n",
      ...Array.from({ length: 20 }, () => `X-Pad: ${"p".repeat(8000)}\r\n`),
    ]);
    expect((err as LlmError).kind).toBe("connection_lost");
    expect((err as LlmError).message).toContain(`head within ${ANSWER_LIMITS.headBytes} bytes`);
  });

  test("a chunk-size line that never ends, in one read or over many", async () => {
    const oneRead = await outcome([`${OK_CHUNKED}a;${"e".repeat(4000)}`], true);
    expect((oneRead as LlmError).message).toContain("malformed chunked body");
    closeScripted();
    const manyReads = await outcome(
      [OK_CHUNKED, "a;", ...Array.from({ length: 40 }, () => "e".repeat(100))],
      true,
    );
    expect((manyReads as LlmError).message).toContain("malformed chunked body");
  });

  test("an error body is not waited for past its limit; its message is still read", async () => {
    const json = JSON.stringify({ error: { code: 500, message: "out of memory", type: "server_error" } });
    const pad = "x".repeat(ANSWER_LIMITS.errorChars);
    const err = await outcome([
      `HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100000000\r\n\r\n`,
      pad.slice(0, 20_000),
      pad.slice(20_000),
      pad,
    ]);
    expect((err as LlmError).kind).toBe("server_error");
    expect((err as LlmError).status).toBe(500);
    closeScripted();
    const s = await outcome([
      `HTTP/1.1 500 Internal Server Error\r\nContent-Length: ${json.length}\r\n\r\n`,
      json,
    ]);
    expect((s as LlmError).message).toContain("out of memory");
  });

  test("a Content-Length that is not a number is malformed; 00 is an empty body", async () => {
    const err = await outcome(["HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\nhello"]);
    expect((err as LlmError).kind).toBe("connection_lost");
    expect((err as LlmError).message).toContain("malformed Content-Length");
    closeScripted();
    expect(await outcome(["HTTP/1.1 200 OK\r\nContent-Length: 00\r\n\r\n"], true)).toBe("");
  });

  test("something that is not HTTP is quoted short", async () => {
    const err = await outcome([`SSH-2.0-${"z".repeat(500)}\r\n\r\n`]);
    expect((err as LlmError).message).toContain("not HTTP");
    expect((err as LlmError).message.length).toBeLessThan(160);
  });

  // Read as latin1, a byte 0x80-0x9f is a C1 control (0x9b opens a sequence as ESC [ does), which
  // JSON.stringify kept raw in the message: another program on the port could drive a terminal.
  test("what is not HTTP, or a malformed length, is quoted with its C1 controls escaped", async () => {
    const err = await outcome(["\u009b2Jnot http\r\n\r\n"]);
    expect((err as LlmError).message).toContain("\\u{9b}2Jnot http");
    expect((err as LlmError).message).not.toContain("\u009b");
    closeScripted();
    const bad = await outcome(["HTTP/1.1 200 OK\r\nContent-Length: 1\u009b\r\n\r\n"]);
    expect((bad as LlmError).message).toContain("\\u{9b}");
    expect((bad as LlmError).message).not.toContain("\u009b");
  });
});

describe("chunkSize", () => {
  const size = (line: string) => {
    // Surrounded by other bytes, as in a read: only [from, to) is looked at.
    const b = Buffer.from(`ab${line}\nff`, "latin1");
    return chunkSize(b, 2, 2 + line.length + 1);
  };

  test("hex digits up to the first other byte: an extension or the CR ends them", () => {
    expect(size("0\r")).toBe(0);
    expect(size("1a3\r")).toBe(0x1a3);
    expect(size("1A3\r")).toBe(0x1a3);
    expect(size("fF;name=value\r")).toBe(255);
    expect(size("ffffffff\r")).toBe(0xffffffff);
  });

  test("no digits, a non-hex first byte or a size over 4 GiB is -1", () => {
    expect(size("\r")).toBe(-1);
    expect(size("g1\r")).toBe(-1);
    expect(size(";ext\r")).toBe(-1);
    expect(size("100000000\r")).toBe(-1);
    expect(size(`${"f".repeat(20)}\r`)).toBe(-1);
  });
});
