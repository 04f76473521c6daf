import { describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { type Endpoint, parseEndpoint } from "../../src/config/rpc-endpoint.ts";
import { acceptsConnections, type QueryRequest, queryWorker } from "../../src/rpc/client.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { RECORDED_DEVICE_BYTES, RpcWorkerStandIn, type WorkerMode } from "../fixtures/rpc-worker.ts";

const at = (endpoint: string): Endpoint => {
  const p = parseEndpoint(endpoint);
  if (!p.ok) throw new Error(p.why);
  return p;
};

describe("queryWorker over TCP", () => {
  test("a recorded worker: version, devices, free and total memory", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const r = await queryWorker(at(w.endpoint));
    expect(r).toMatchObject({
      endpoint: w.endpoint,
      ok: true,
      version: { major: 5, minor: 1, patch: 0 },
      devices: [{ free_bytes: RECORDED_DEVICE_BYTES, total_bytes: RECORDED_DEVICE_BYTES }],
    });
    // The address it was reached at: what tells one worker listed under two names.
    expect(r).toMatchObject({ address: w.endpoint });
    // The worker is free again for the next client (llama-server) once the query is done.
    expect((await queryWorker(at(w.endpoint))).ok).toBe(true);
  });

  test("a closed port is refused, fast", async () => {
    const port = await pickFreePort();
    const r = await queryWorker(at(`127.0.0.1:${port}`));
    expect(r).toMatchObject({ ok: false, failure: "refused" });
    expect(r.ms).toBeLessThan(1000);
  });

  test("a name that does not resolve is unresolved", async () => {
    expect(await queryWorker(at("no-such-host.invalid:50052"))).toMatchObject({
      ok: false,
      failure: "unresolved",
    });
  });

  test("a name whose resolver never answers is unresolved at the deadline, not a machine that is off", async () => {
    // The resolver never calls back: a name server that does not answer (an mDNS .local name).
    const lookup = (() => {}) as unknown as QueryRequest["lookup"];
    const r = await queryWorker(at("slow-name.lan:50052"), { timeoutMs: 200, ...(lookup ? { lookup } : {}) });
    expect(r).toMatchObject({ ok: false, failure: "unresolved" });
    if (!r.ok) expect(r.message).toMatch(/did not resolve within 200 ms/);
  });

  const cases: [WorkerMode, string, RegExp][] = [
    ["hang", "timeout", /did not answer within 300 ms/],
    ["garbage", "malformed", /size field/],
    ["huge", "malformed", /9223372036854775808/],
    ["http", "malformed", /HTTP server/],
    ["close", "closed", /without answering HELLO/],
    ["extra", "malformed", /more bytes/],
    // Not a worker busy with another client (that one answers nothing): it began and froze.
    ["midway", "timeout", /answered HELLO \(RPC v5\.1\.0\) but stopped answering DEVICE_COUNT/],
  ];
  test.each(cases)("a worker that answers %s → %s", async (mode, failure, message) => {
    await using w = await new RpcWorkerStandIn({ mode }).start();
    const t0 = Date.now();
    // Beside the hang, a limit no loaded machine reaches: each fails on what it was answered, well before it.
    const timeoutMs = mode === "hang" || mode === "midway" ? 300 : 5000;
    const r = await queryWorker(at(w.endpoint), { timeoutMs });
    expect(r).toMatchObject({ ok: false, failure });
    if (!r.ok) expect(r.message).toMatch(message);
    expect(Date.now() - t0).toBeLessThan(mode === "hang" ? 2000 : 4000);
  });

  test("another major version is wrong_version when one is expected, with the version it speaks", async () => {
    await using w = await new RpcWorkerStandIn({ version: [7, 0, 0] }).start();
    const r = await queryWorker(at(w.endpoint), { expectMajor: 5 });
    expect(r).toMatchObject({
      ok: false,
      failure: "wrong_version",
      version: { major: 7, minor: 0, patch: 0 },
    });
  });

  test("a worker busy with another client (one at a time) times out, saying why", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const net = await import("node:net");
    const holder = net.connect({ host: "127.0.0.1", port: w.port });
    await new Promise((resolve) => holder.on("connect", resolve));
    holder.write(new Uint8Array([14, 24, 0, 0, 0, 0, 0, 0, 0, ...new Array(24).fill(0)]));
    const r = await queryWorker(at(w.endpoint), { timeoutMs: 300 });
    expect(r).toMatchObject({ ok: false, failure: "timeout" });
    if (!r.ok) expect(r.message).toContain("one client at a time");
    holder.destroy();
  });

  test("a server that sends endless bytes is cut off without buffering them", async () => {
    const server = createServer((s) => {
      s.on("error", () => {});
      const junk = Buffer.alloc(64 * 1024, 0x41);
      const pump = () => {
        while (!s.destroyed && s.write(junk)) {}
      };
      s.on("drain", pump);
      pump();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const r = await queryWorker(at(`127.0.0.1:${port}`), { timeoutMs: 5000 });
    expect(r).toMatchObject({ ok: false, failure: "malformed" });
    server.close();
  });

  test("a name with several addresses is asked at its first IPv4 one only, as llama-server connects", async () => {
    // llama.cpp's socket_t::connect takes gethostbyname's first address (AF_INET) and tries no
    // other; a query that fell through to a later address said ok for a worker llama-server
    // cannot reach (or reached another machine than the one it will use).
    await using w = await new RpcWorkerStandIn().start();
    const dead = "127.0.0.8";
    const asked: { family?: number; all?: boolean }[] = [];
    const lookup = ((
      _host: string,
      options: { family?: number; all?: boolean },
      cb: (...a: unknown[]) => void,
    ) => {
      asked.push(options);
      const list = [
        { address: dead, family: 4 },
        { address: "::1", family: 6 },
        { address: "127.0.0.1", family: 4 },
      ];
      if (options.all) cb(null, options.family === 4 ? list.filter((a) => a.family === 4) : list);
      else cb(null, dead, 4);
    }) as unknown as QueryRequest["lookup"];
    const target = at(`many.test:${w.port}`);
    expect(await queryWorker(target, { lookup, timeoutMs: 5000 })).toMatchObject({
      ok: false,
      failure: "refused",
    });
    expect(await acceptsConnections(target, 5000, lookup)).toBe(false);
    expect(asked.every((o) => o.family === 4)).toBe(true);
  });

  test("a name with IPv6 addresses only is told so, not 'does not resolve'", async () => {
    // llama-server connects over IPv4 only (gethostbyname): such a name is unusable, but it
    // resolves (ping reaches it), and 'does not resolve, use the IP address' sent the user to
    // an IPv6 literal, which llama.cpp cannot take either.
    const lookup = ((
      _host: string,
      options: { family?: number; all?: boolean },
      cb: (...a: unknown[]) => void,
    ) => {
      if (options.family === 4)
        return cb(Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" }));
      const list = [{ address: "fd00::5", family: 6 }];
      if (options.all) cb(null, list);
      else cb(null, "fd00::5", 6);
    }) as unknown as QueryRequest["lookup"];
    const r = await queryWorker(at("six.lan:50052"), { lookup, timeoutMs: 5000 });
    expect(r).toMatchObject({ ok: false, failure: "unresolved" });
    if (!r.ok) expect(r.message).toMatch(/no IPv4 address.*fd00::5.*IPv4 only/);
    // A name with no address at all still reads as before.
    const none = ((_h: string, _o: unknown, cb: (...a: unknown[]) => void) =>
      cb(
        Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" }),
      )) as unknown as QueryRequest["lookup"];
    const r2 = await queryWorker(at("gone.lan:50052"), { lookup: none, timeoutMs: 5000 });
    expect(r2).toMatchObject({ ok: false, failure: "unresolved", message: "the host name does not resolve" });
    // The second question unanswered at the deadline: still the name's failure, not a machine that is off.
    const silent = ((_h: string, o: { family?: number }, cb: (...a: unknown[]) => void) => {
      if (o.family === 4) cb(Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" }));
    }) as unknown as QueryRequest["lookup"];
    const r3 = await queryWorker(at("slow.lan:50052"), { lookup: silent, timeoutMs: 200 });
    expect(r3).toMatchObject({ ok: false, failure: "unresolved", message: "the host name does not resolve" });
  });

  // While llama-server dies the core tries each worker by its name: a name server's hiccup at
  // that moment (EAI_AGAIN) read as a worker gone, and the next start left a live worker out.
  test("acceptsConnections cannot tell when the name does not resolve: undefined, not false", async () => {
    await using w = await new RpcWorkerStandIn({ mode: "hang" }).start();
    const failing = (code: string) =>
      ((_h: string, _o: unknown, cb: (...a: unknown[]) => void) =>
        cb(Object.assign(new Error(`getaddrinfo ${code}`), { code }))) as unknown as QueryRequest["lookup"];
    for (const code of ["EAI_AGAIN", "ENOTFOUND"])
      expect(await acceptsConnections(at(`flaky.lan:${w.port}`), 5000, failing(code))).toBeUndefined();
    // A name server that does not answer by the deadline: the same.
    const silent = (() => {}) as unknown as QueryRequest["lookup"];
    expect(await acceptsConnections(at(`slow.lan:${w.port}`), 100, silent)).toBeUndefined();
    // Resolved, it is told as before.
    const found = ((_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      o.all
        ? cb(null, [{ address: "127.0.0.1", family: 4 }])
        : cb(null, "127.0.0.1", 4)) as unknown as QueryRequest["lookup"];
    expect(await acceptsConnections(at(`flaky.lan:${w.port}`), 5000, found)).toBe(true);
  });

  test("acceptsConnections tells a live port from a dead one without talking to it", async () => {
    await using w = await new RpcWorkerStandIn({ mode: "hang" }).start();
    expect(await acceptsConnections(at(w.endpoint), 500)).toBe(true);
    await w.kill();
    expect(await acceptsConnections(at(w.endpoint), 500)).toBe(false);
  });
});
