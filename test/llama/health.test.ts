import { describe, expect, test } from "bun:test";
import { healthStatus, modelsStatus } from "../../src/llama/health.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readExchanges, readTranscript } from "../contract/transcript.ts";
import { endlessBody, TAPE_KEY, tape } from "./tape.ts";

describe("readiness and the key check", () => {
  test("02-health-ready.txt: /health's status, asked without the key", async () => {
    using t = tape(readTranscript(RECORDINGS, "02-health-ready.txt"));
    expect(await healthStatus(t.baseUrl, 1000)).toBe(200);
    expect(t.asked[0]).toMatchObject({ path: "/health", authorization: null });
  });

  test("76-api-key.txt: /v1/models is 401 without the key and 200 with it", async () => {
    const [anonymous, , keyed] = readExchanges(RECORDINGS, "76-api-key.txt");
    using t = tape(anonymous!, keyed!);
    expect(await modelsStatus({ baseUrl: t.baseUrl }, 1000)).toBe(401);
    expect(await modelsStatus(t, 1000)).toBe(200);
    expect(t.asked.map((a) => a.authorization)).toEqual([null, `Bearer ${TAPE_KEY}`]);
  });

  test("nothing listening (the port not open yet, 01): null", async () => {
    const t = tape();
    t[Symbol.dispose]();
    expect(await healthStatus(t.baseUrl, 1000)).toBeNull();
  });
});

describe("no connection kept", () => {
  // llama-server's HTTP library checks an idle kept-alive connection every 10 ms and its stop
  // waits for that check: a call leaves none open (docs/performance.md "The swap, fourth pass").
  test("a call asks to close its connection, and it is closed once answered", async () => {
    const closed = Promise.withResolvers<void>();
    let opened = 0;
    let head = "";
    const server = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open: () => {
          opened += 1;
        },
        data: (s, bytes) => {
          head += Buffer.from(bytes).toString("latin1");
          if (!head.includes("\r\n\r\n")) return;
          // Answers as a keep-alive server would: the connection stays open unless one side ends it.
          s.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok");
        },
        close: () => closed.resolve(),
      },
    });
    try {
      expect(await healthStatus(`http://127.0.0.1:${server.port}`, 1000)).toBe(200);
      expect(head.toLowerCase()).toContain("connection: close\r\n");
      const ended = await Promise.race([closed.promise.then(() => true), Bun.sleep(2000).then(() => false)]);
      expect(ended).toBe(true);
      expect(opened).toBe(1);
    } finally {
      server.stop(true);
    }
  });
});

describe("a body that never ends", () => {
  // statusOf read /health's and /v1/models's body whole (to drop it) for any status: a program on
  // the port answering with an endless body (a broken proxy, a hostile one) filled the core's
  // memory at loopback speed before the check's deadline fired, as an error body did elsewhere.
  test("/health and /v1/models: the status, the body read no further than its bound", async () => {
    for (const status of [503, 200]) {
      using server = endlessBody(status);
      expect(await healthStatus(server.baseUrl, 30_000)).toBe(status);
      expect(server.sent()).toBeLessThan(64 * 1024 * 1024);
      server.reset();
      expect(await modelsStatus(server, 30_000)).toBe(status);
      expect(server.sent()).toBeLessThan(64 * 1024 * 1024);
    }
  });
});
