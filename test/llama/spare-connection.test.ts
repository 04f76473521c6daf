import { afterEach, describe, expect, test } from "bun:test";
import { createServer, type Socket } from "node:net";
import { ConnectionRefused, LlmError } from "../../src/llama/errors.ts";
import { SPARE_MS, SpareConnection } from "../../src/llama/spare-connection.ts";
import { type BodyReader, postStream } from "../../src/llama/stream-socket.ts";
import { closeTcpServers, tcpServer } from "../fixtures/tcp-server.ts";
import { waitFor } from "../fixtures/wait.ts";

// The first request's connection opened as the chat arrives (docs/performance.md, "The
// connection opened ahead"): used when it is the same launch's and alive, else the request
// connects as before; never left open.

afterEach(closeTcpServers);

interface Conn {
  socket: Socket;
  request?: string;
  closed: Promise<void>;
}

/** A server that answers each whole request with a short chunked body and lists its connections. */
async function server(options: { dropFirst?: boolean } = {}) {
  const conns: Conn[] = [];
  const { baseUrl } = await tcpServer((socket) => {
    const closed = Promise.withResolvers<void>();
    const conn: Conn = { socket, closed: closed.promise };
    conns.push(conn);
    socket.on("close", () => closed.resolve());
    socket.on("error", () => {});
    if (options.dropFirst && conns.length === 1) return void socket.destroy();
    let got = "";
    socket.on("data", (d) => {
      got += d.toString("latin1");
      const headEnd = got.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? 0);
      if (headEnd < 0 || got.length < headEnd + 4 + length) return;
      conn.request = got;
      socket.end("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n");
    });
  });
  return { conns, baseUrl };
}

async function all(reader: BodyReader): Promise<string> {
  let text = "";
  for (let t = await reader.read(); t !== undefined; t = await reader.read()) text += t;
  return text;
}

async function until(check: () => boolean, ms = 2000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await Bun.sleep(2))
    if (Date.now() > end) throw new Error("timed out");
}

/** A port nothing listens on. */
async function deadPort(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

const never = new AbortController().signal;
const post = (ep: { baseUrl: string; apiKey: string }, spare?: SpareConnection) =>
  postStream(ep, "/v1/chat/completions", '{"x":1}', never, undefined, spare);

describe("SpareConnection", () => {
  test("the request goes over the connection opened ahead, once it is open", async () => {
    const srv = await server();
    const ep = { baseUrl: srv.baseUrl, apiKey: "k" };
    const spare = new SpareConnection(ep);
    await until(() => srv.conns.length === 1);
    expect(await all(await post(ep, spare))).toBe("ok");
    expect(srv.conns.length).toBe(1);
    expect(srv.conns[0]?.request).toContain('{"x":1}');
    spare.close(); // taken: the request's, not closed from here
  });

  test("taken while it still connects: the request goes when it opens", async () => {
    const srv = await server();
    const ep = { baseUrl: srv.baseUrl, apiKey: "k" };
    const spare = new SpareConnection(ep);
    expect(await all(await post(ep, spare))).toBe("ok");
    expect(srv.conns.map((c) => c.request !== undefined)).toEqual([true]);
  });

  test("another launch's (its key) is not taken: the request connects anew, and close() drops the spare", async () => {
    const srv = await server();
    const spare = new SpareConnection({ baseUrl: srv.baseUrl, apiKey: "old" });
    await until(() => srv.conns.length === 1);
    expect(await all(await post({ baseUrl: srv.baseUrl, apiKey: "new" }, spare))).toBe("ok");
    expect(srv.conns.map((c) => c.request !== undefined)).toEqual([false, true]);
    spare.close();
    await srv.conns[0]?.closed;
  });

  test(
    "not taken in time: closed",
    async () => {
      const srv = await server();
      const ep = { baseUrl: srv.baseUrl, apiKey: "k" };
      const spare = new SpareConnection(ep);
      await until(() => srv.conns.length === 1);
      await srv.conns[0]?.closed;
      expect(srv.conns[0]?.request).toBeUndefined();
      // Gone: a request then connects as before.
      expect(await all(await post(ep, spare))).toBe("ok");
      expect(srv.conns.length).toBe(2);
    },
    SPARE_MS + 3000,
  );

  test("closed by the server before it was taken: the request connects anew", async () => {
    const srv = await server({ dropFirst: true });
    const ep = { baseUrl: srv.baseUrl, apiKey: "k" };
    const spare = new SpareConnection(ep);
    await until(() => srv.conns.length === 1);
    await srv.conns[0]?.closed;
    await Bun.sleep(20); // the client's end hears it
    expect(await all(await post(ep, spare))).toBe("ok");
    expect(srv.conns.map((c) => c.request !== undefined)).toEqual([false, true]);
  });

  test("refused, before or after it was taken: the request's own connect is refused, as without one", async () => {
    const ep = { baseUrl: await deadPort(), apiKey: "k" };
    const early = new SpareConnection(ep);
    await Bun.sleep(50);
    await expect(post(ep, early)).rejects.toBeInstanceOf(ConnectionRefused);
    // Taken in the same tick, before the refusal is heard: the fallback connects and is refused.
    await expect(post(ep, new SpareConnection(ep))).rejects.toBeInstanceOf(ConnectionRefused);
  });

  test("its server gone (as /proc says) when a request would take it: dropped, and the fresh connect is refused", async () => {
    // Its close may not be heard yet: written to, it would fail as a death mid-answer rather
    // than be sent again on the restarted server (agent/watched-completion.ts).
    const srv = await server();
    const ep = { baseUrl: srv.baseUrl, apiKey: "k" };
    let running = true;
    const spare = new SpareConnection(ep, { alive: () => running });
    await until(() => srv.conns.length === 1);
    closeTcpServers();
    srv.conns[0]?.socket.resetAndDestroy();
    running = false;
    // The reset is in the kernel; nothing yields to the event loop before the request asks.
    for (const t = performance.now(); performance.now() - t < 20; );
    await expect(post(ep, spare)).rejects.toBeInstanceOf(ConnectionRefused);
  });

  test("a server that dies on the request itself, over a spare: connection_lost, its death, not a refusal", async () => {
    // A refusal is sent again on a restarted server; a request that kills llama-server would
    // kill that one too.
    const { baseUrl } = await tcpServer((socket) => {
      socket.on("error", () => {});
      socket.on("data", () => socket.resetAndDestroy());
    });
    const ep = { baseUrl, apiKey: "k" };
    const spare = new SpareConnection(ep);
    await Bun.sleep(20);
    const err = await post(ep, spare).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LlmError);
    expect(err).not.toBeInstanceOf(ConnectionRefused);
    expect((err as LlmError).kind).toBe("connection_lost");
  });

  test("a chat cancelled before its request: close() drops the connection at once", async () => {
    const srv = await server();
    // Its own expiry out of the test's reach: only close() can have dropped it, however late
    // a loaded machine hears that.
    const spare = new SpareConnection({ baseUrl: srv.baseUrl, apiKey: "k" }, { expireMs: 600_000 });
    await until(() => srv.conns.length === 1);
    let closed = false;
    void srv.conns[0]?.closed.then(() => {
      closed = true;
    });
    spare.close();
    expect(await waitFor(() => closed)).toBe(true);
  });
});
