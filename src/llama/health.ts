import { statusOf, type Target } from "./http.ts";

/**
 * Readiness (test/fixtures/llama-server/transcripts/01, 02, 76): the port is bound before the model
 * loads and every route answers 503 "Loading model" until it has; `/health` turns 200 then. It is
 * public, so it cannot tell our child from another program on the port: `/v1/models` is behind the
 * key.
 */

/** GET /health: its status, or null when nothing answers (the port is not open yet). */
export function healthStatus(baseUrl: string, timeoutMs: number): Promise<number | null> {
  return statusOf({ baseUrl }, "/health", { timeoutMs });
}

/**
 * GET /v1/models with `server.apiKey`, or with no key when it has none: 401 from a server that
 * wants another key (or any), 200 when the key is right; null when nothing answers.
 */
export function modelsStatus(server: Target, timeoutMs: number): Promise<number | null> {
  return statusOf(server, "/v1/models", { timeoutMs });
}

/**
 * Whether a server answers `GET /health` on 127.0.0.1:`port` at all, over a connection of its
 * own: false when the connection is refused, or closed before the first byte of an answer (a
 * server killed a moment ago: the kernel may still take a connection on its port while it closes
 * it); true on any answer, or none within `timeoutMs` (slowness is the watchdog's to judge), or
 * a local error that says nothing of the server. A bare socket, not fetch: fetch may reuse a
 * kept-alive connection, and on one to a server that died it reads "reset" either way.
 */
export function answersAtAll(port: number, timeoutMs: number): Promise<boolean> {
  const { promise, resolve } = Promise.withResolvers<boolean>();
  let settled = false;
  const settle = (answered: boolean, socket?: { end(): void }) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket?.end();
    resolve(answered);
  };
  const timer = setTimeout(() => settle(true), timeoutMs);
  const gone = () => settle(false);
  Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      open: (s) => {
        s.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      },
      data: (s) => settle(true, s),
      end: gone,
      close: gone,
      error: gone,
    },
  }).catch((err: NodeJS.ErrnoException) => settle(err?.code !== "ECONNREFUSED"));
  return promise;
}
