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
