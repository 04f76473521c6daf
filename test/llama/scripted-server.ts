import { createServer, type Server, type Socket } from "node:net";

// A server of scripted socket writes, for the stream's own HTTP read (src/llama/stream-socket.ts)
// and what reads through it: every byte and every pause as the test wants them.
const open = new Set<Server>();

/** Closes every scripted server still listening (tests call it in afterEach, or to start over). */
export function closeScripted(): void {
  for (const s of open) s.close();
  open.clear();
}

/**
 * A server that reads one whole request and answers with `writes` (latin1: one char a byte), one
 * socket write each, `gapMs` apart (an empty one only waits), then ends unless `end` is false.
 */
export async function scripted(
  writes: string[],
  options: { end?: boolean; gapMs?: number } = {},
): Promise<{ baseUrl: string; request: Promise<string>; closed: Promise<void> }> {
  const request = Promise.withResolvers<string>();
  const closed = Promise.withResolvers<void>();
  const server = createServer((socket: Socket) => {
    let got = "";
    socket.on("close", () => closed.resolve());
    socket.on("error", () => {});
    socket.on("data", async (d) => {
      got += d.toString("latin1");
      const headEnd = got.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? 0);
      if (headEnd < 0 || got.length < headEnd + 4 + length) return;
      request.resolve(got);
      for (const w of writes) {
        if (socket.destroyed) return;
        socket.write(Buffer.from(w, "latin1"));
        await Bun.sleep(options.gapMs ?? 2);
      }
      if (options.end !== false) socket.end();
    });
  });
  open.add(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return { baseUrl: `http://127.0.0.1:${port}`, request: request.promise, closed: closed.promise };
}
