import { afterEach, expect, test } from "bun:test";
import { createConnection } from "node:net";
import { SpareConnection } from "../../src/llama/spare-connection.ts";
import { closeTcpServers, tcpServer } from "../fixtures/tcp-server.ts";
import { waitFor } from "../fixtures/wait.ts";
import { ChatHarness } from "./harness.ts";

// A chat opens its first request's connection as it arrives, to the server that serves then
// (docs/performance.md, "The connection opened ahead"): the connect is made before the turn takes
// its lease, and the request then goes over it; a turn that ends before its request closes it.

afterEach(closeTcpServers);

interface Seen {
  acceptedAt: number;
  firstByteAt?: number;
  closed: Promise<void>;
}

/** A TCP proxy in front of the stand-in that notes when each connection came and first spoke. */
async function proxy(target: string): Promise<{ baseUrl: string; seen: Seen[]; accepted: Promise<void> }> {
  const port = Number(new URL(target).port);
  const seen: Seen[] = [];
  const accepted = Promise.withResolvers<void>();
  const { baseUrl } = await tcpServer((client) => {
    const closed = Promise.withResolvers<void>();
    const s: Seen = { acceptedAt: performance.now(), closed: closed.promise };
    seen.push(s);
    accepted.resolve();
    const upstream = createConnection({ host: "127.0.0.1", port });
    client.on("data", (d) => {
      s.firstByteAt ??= performance.now();
      upstream.write(d);
    });
    upstream.on("data", (d) => client.write(d));
    client.on("close", () => {
      upstream.destroy();
      closed.resolve();
    });
    upstream.on("close", () => client.end());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  return { baseUrl, seen, accepted: accepted.promise };
}

test("the first request goes over a connection opened before the turn had its lease", async () => {
  await using h = new ChatHarness({ mcp_servers: [], agents: [{ name: "assistant", system_prompt: "S" }] });
  const p = await proxy(h.llama.baseUrl);
  h.provider.via = p.baseUrl;
  // The lease comes once the proxy accepted a connection: the one made ahead, whatever the load
  // (none made ahead: the lease comes after 5 s, and the connection after it).
  h.provider.beforeLease = () => Promise.race([p.accepted, Bun.sleep(5000)]);
  h.llama.script({ content: ["one", " two"] });
  const { terminal } = await h.chat(1, { input: "hi" });
  expect(terminal.type).toBe("result");
  expect(p.seen.length).toBe(1);
  const [conn] = p.seen as [Seen];
  const leased = h.provider.leasedAt[0] as number;
  expect(conn.acceptedAt).toBeLessThan(leased);
  expect(conn.firstByteAt as number).toBeGreaterThan(leased);
});

test("a server that is not serving yet: the request connects after the lease, as before", async () => {
  await using h = new ChatHarness({ mcp_servers: [], agents: [{ name: "assistant", system_prompt: "S" }] });
  const p = await proxy(h.llama.baseUrl);
  h.provider.via = p.baseUrl;
  h.provider.connectAhead = () => undefined;
  h.llama.script({ content: "ok" });
  expect((await h.chat(1, { input: "hi" })).terminal.type).toBe("result");
  expect(p.seen.length).toBe(1);
  expect((p.seen[0] as Seen).acceptedAt).toBeGreaterThan(h.provider.leasedAt[0] as number);
});

test("a turn that ends before its request closes the connection it opened", async () => {
  await using h = new ChatHarness({ mcp_servers: [], agents: [{ name: "assistant", system_prompt: "S" }] });
  const p = await proxy(h.llama.baseUrl);
  h.provider.via = p.baseUrl;
  // The spare's own expiry out of the test's reach: only the chat's end can close it.
  h.provider.connectAhead = () =>
    new SpareConnection({ baseUrl: p.baseUrl, apiKey: h.llama.apiKey }, { expireMs: 600_000 });
  h.provider.acquire = () => Promise.reject(new Error("no slot in this test"));
  const { terminal } = await h.chat(1, { input: "hi" });
  expect(terminal.type).toBe("error");
  // The connect may still be under way as the chat ends: it is closed as soon as it opens.
  expect(await waitFor(() => p.seen.length > 0, { intervalMs: 2 })).toBe(true);
  expect(p.seen.length).toBe(1);
  const [conn] = p.seen as [Seen];
  let closed = false;
  void conn.closed.then(() => {
    closed = true;
  });
  expect(await waitFor(() => closed)).toBe(true);
  expect(conn.firstByteAt).toBeUndefined();
});
