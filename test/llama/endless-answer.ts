import { TAPE_KEY } from "./tape.ts";

/**
 * A server whose 200 JSON answer never ends: its n-th piece is `piece(n)`, each after the last was
 * taken and `pauseMs` more (0: as fast as it is read). No recording shows one: it stands for a
 * broken server, or another program on the port.
 */
export function endlessAnswer(
  piece: (n: number) => Uint8Array,
  pauseMs = 0,
): { baseUrl: string; apiKey: string; pieces: () => number } & Disposable {
  let sent = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () =>
      new Response(
        new ReadableStream({
          async pull(c) {
            c.enqueue(piece(sent++));
            if (pauseMs > 0) await Bun.sleep(pauseMs);
          },
        }),
        { headers: { "content-type": "application/json" } },
      ),
  });
  return {
    baseUrl: `http://127.0.0.1:${server.port}`,
    apiKey: TAPE_KEY,
    pieces: () => sent,
    [Symbol.dispose]: () => server.stop(true),
  };
}
