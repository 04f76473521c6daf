import { describe, expect, test } from "bun:test";
import { createServer, type Socket } from "node:net";
import { streamCompletion } from "../../src/llama/completion.ts";
import { call } from "../../src/llama/http.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readTranscript } from "../contract/transcript.ts";

// llama-server closes the connection after a streamed answer; a request the client sends on that
// connection right then fails ECONNRESET (seen against llama.cpp b10587: 7 of 40 requests sent at
// once after a stream; docs/agent.md, "llama-server's connections"). So a stream has a connection
// of its own, never handed to the next request. This server keeps every connection open and
// counts them: a reused stream connection would show as one.

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
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe("a stream's connection", () => {
  test("is its own: the request after a stream goes on another connection (11)", async () => {
    const server = keepAliveServer();
    const baseUrl = await server.listen();
    try {
      const endpoint = { baseUrl, apiKey: "k" };
      await (await call(endpoint, "/health")).text();
      await (await call(endpoint, "/health")).text();
      // Plain requests share one kept connection.
      expect(server.connections()).toBe(1);
      const result = await streamCompletion(
        endpoint,
        { messages: [{ role: "user", content: "hi" }] },
        { signal: new AbortController().signal, onDelta: () => {} },
      );
      expect(result.content.length).toBeGreaterThan(0);
      await (await call(endpoint, "/health")).text();
      // The stream opened one of its own, and the request after it did not take that one.
      expect(server.connections()).toBe(2);
    } finally {
      server.close();
    }
  });
});
