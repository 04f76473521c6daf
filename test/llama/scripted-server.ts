import { spyOn } from "bun:test";
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
  const baseUrl = await listening((socket, got) => {
    socket.on("close", () => closed.resolve());
    request.resolve(got);
    void (async () => {
      for (const w of writes) {
        if (socket.destroyed) return;
        socket.write(Buffer.from(w, "latin1"));
        await Bun.sleep(options.gapMs ?? 2);
      }
      if (options.end !== false) socket.end();
    })();
  });
  return { baseUrl, request: request.promise, closed: closed.promise };
}

/** A listening server that hands each connection to `answer` once its whole request was read; its URL. */
async function listening(answer: (socket: Socket, request: string) => void): Promise<string> {
  const server = createServer((socket: Socket) => {
    let got = "";
    let answered = false;
    socket.on("error", () => {});
    socket.on("data", (d) => {
      if (answered) return;
      got += d.toString("latin1");
      const headEnd = got.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? 0);
      if (headEnd < 0 || got.length < headEnd + 4 + length) return;
      answered = true;
      answer(socket, got);
    });
  });
  open.add(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/**
 * A server whose answer the test writes itself, piece by piece: each `write` resolves once the
 * kernel took it. For tests that must know what was sent when: timed gaps (`scripted`) raced the
 * test's own timers, and a loaded CI box lost that race.
 */
export async function stepped(): Promise<{
  baseUrl: string;
  write(text: string): Promise<void>;
  end(): void;
}> {
  const asked = Promise.withResolvers<Socket>();
  const baseUrl = await listening((socket) => asked.resolve(socket));
  let socket: Socket | undefined;
  void asked.promise.then((s) => {
    socket = s;
  });
  return {
    baseUrl,
    write: async (text) => {
      const s = socket ?? (await asked.promise);
      await new Promise<void>((r) => s.write(Buffer.from(text, "latin1"), () => r()));
    },
    end: () => socket?.end(),
  };
}

/**
 * Counts the network reads of the connections the code under test opens (Bun.connect's `data`),
 * so a test can wait until bytes it sent were read, not sleep and hope. Restored when disposed.
 */
export function clientReads(): { next(): Promise<void>; [Symbol.dispose](): void } {
  const real = Bun.connect;
  let waiter = Promise.withResolvers<void>();
  type Options = Parameters<typeof Bun.connect>[0];
  const spy = spyOn(Bun, "connect").mockImplementation(((options: Options) =>
    real({
      ...options,
      socket: {
        ...options.socket,
        data: (s, bytes) => {
          options.socket.data?.(s, bytes);
          waiter.resolve();
        },
      },
    } as Options)) as typeof Bun.connect);
  return {
    next: () => {
      waiter = Promise.withResolvers<void>();
      return waiter.promise;
    },
    [Symbol.dispose]: () => spy.mockRestore(),
  };
}
