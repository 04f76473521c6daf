import type { Transcript } from "../contract/transcript.ts";

/** A request the tape was asked, as it arrived. */
export interface Asked {
  method: string;
  /** Path and query, e.g. `/slots/0?action=save`. */
  path: string;
  authorization: string | null;
  contentType: string | null;
  body: string;
}

/** A server that answers recorded responses byte for byte, in order (the last one again after them). */
export interface Tape extends Disposable {
  baseUrl: string;
  apiKey: string;
  asked: Asked[];
}

export const TAPE_KEY = "tape-key";

export function tape(...answers: Pick<Transcript, "status" | "headers" | "body">[]): Tape {
  const asked: Asked[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url);
      asked.push({
        method: req.method,
        path: url.pathname + url.search,
        authorization: req.headers.get("authorization"),
        contentType: req.headers.get("content-type"),
        body: await req.text(),
      });
      const answer = answers[Math.min(asked.length, answers.length) - 1];
      if (!answer) return new Response("no answer recorded", { status: 599 });
      return new Response(answer.body, {
        status: answer.status,
        headers: { "Content-Type": answer.headers["content-type"] ?? "application/json; charset=utf-8" },
      });
    },
  });
  return {
    baseUrl: `http://127.0.0.1:${server.port}`,
    apiKey: TAPE_KEY,
    asked,
    [Symbol.dispose]: () => void server.stop(true),
  };
}

/** A server answering every request with `status` and a body of 256 MiB (never ending, to a reader); `sent()` counts what it gave. */
export function endlessBody(status: number): Tape & { sent(): number; reset(): void } {
  let sent = 0;
  const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= 256 * 1024 * 1024) return controller.close();
            sent += chunk.byteLength;
            controller.enqueue(chunk);
          },
        }),
        { status },
      ),
  });
  return {
    baseUrl: `http://127.0.0.1:${server.port}`,
    apiKey: TAPE_KEY,
    asked: [],
    sent: () => sent,
    reset: () => {
      sent = 0;
    },
    [Symbol.dispose]: () => void server.stop(true),
  };
}
