import { describe, expect, test } from "bun:test";
import { createServer, type Socket } from "node:net";
import { streamCompletion } from "../../src/llama/completion.ts";
import { call } from "../../src/llama/http.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readTranscript } from "../contract/transcript.ts";

// llama-server closes the connection after a streamed answer; a request the client sends on that
// connection right then fails ECONNRESET (seen against llama.cpp b10587: 7 of 40 requests sent at
// once after a stream; docs/agent.md, "llama-server's connections"). So a stream has a connection
// of its own, never handed to the next request; and since an idle kept-alive connection delays
// llama-server's stop by up to 10 ms (docs/performance.md "The swap, fourth pass"), no request keeps
// its connection either. This server keeps every connection open unless the client ends it, and
// counts them: a reused connection would show as one fewer, a kept one as still open.

const SSE = readTranscript(RECORDINGS, "11-chat-stream.txt").body;

/** An HTTP/1.1 server on a raw socket: each request answered with keep-alive, connections counted. */
function keepAliveServer() {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = pending.subarray(0, end).toString();
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        pending = pending.subarray(end + 4 + length);
        const stream = head.startsWith("POST /v1/chat/completions");
        const body = stream ? SSE : '{"status":"ok"}';
        const type = stream ? "text/event-stream" : "application/json";
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: keep-alive\r\n\r\n${body}`,
        );
      }
    });
    socket.on("close", () => sockets.delete(socket));
  });
  return {
    listen: () =>
      new Promise<string>((resolve) =>
        server.listen(0, "127.0.0.1", () => {
          const address = server.address();
          resolve(`http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
        }),
      ),
    connections: () => connections,
    open: () => sockets.size,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe("a stream's connection", () => {
  test("is its own, and no request keeps one: each on a connection closed once answered (11)", async () => {
    const server = keepAliveServer();
    const baseUrl = await server.listen();
    try {
      const endpoint = { baseUrl, apiKey: "k" };
      await (await call(endpoint, "/health")).text();
      await (await call(endpoint, "/health")).text();
      expect(server.connections()).toBe(2);
      const result = await streamCompletion(
        endpoint,
        { messages: [{ role: "user", content: "hi" }] },
        { signal: new AbortController().signal, onDelta: () => {} },
      );
      expect(result.content.length).toBeGreaterThan(0);
      await (await call(endpoint, "/health")).text();
      expect(server.connections()).toBe(4);
      // Every one of them ended by the client, though the server would have kept it.
      for (let i = 0; i < 200 && server.open() > 0; i++) await Bun.sleep(5);
      expect(server.open()).toBe(0);
    } finally {
      server.close();
    }
  });
});
