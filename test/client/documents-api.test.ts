import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { LocalAiClient } from "../../src/client/index.ts";

// client.documents.* and client.embed against the scripted core: each sends its method with
// the params as given; documents.add streams its index_progress, then resolves.
const FAKE = join(import.meta.dir, "fake-core.mjs");
const clients: LocalAiClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.kill();
});

async function startClient(): Promise<LocalAiClient> {
  const client = await LocalAiClient.start({
    binary: process.execPath,
    args: [FAKE],
    env: { ...process.env },
  });
  clients.push(client);
  return client;
}

describe("client.documents and client.embed", () => {
  test("each sends its method and params; add streams index_progress before its result", async () => {
    const client = await startClient();
    const add = client.documents.add({ text: "hello", session_id: "s" });
    const phases: string[] = [];
    for await (const ev of add) phases.push(`${ev.event}:${ev.phase}:${ev.done}/${ev.total}`);
    expect(phases).toEqual(["index_progress:reading:1/2"]);
    expect((await add.result) as unknown).toEqual({
      method: "documents.add",
      params: { text: "hello", session_id: "s" },
    });
    expect((await client.documents.list({ session_id: "s" })) as unknown).toEqual({
      method: "documents.list",
      params: { session_id: "s" },
    });
    // A page at a time, as sessions.list: the cursor of one page asks for the next.
    expect((await client.documents.list({ limit: 2, before: "cursor" })) as unknown).toEqual({
      method: "documents.list",
      params: { limit: 2, before: "cursor" },
    });
    expect((await client.documents.delete({ document_id: "doc-1" })) as unknown).toEqual({
      method: "documents.delete",
      params: { document_id: "doc-1" },
    });
    expect((await client.embed({ input: ["a", "b"] })) as unknown).toEqual({
      method: "embed",
      params: { input: ["a", "b"] },
    });
  });

  test("an embed aborted by the host or past its time limit is cancelled on the core's side too", async () => {
    const client = await startClient();
    const hanging = async () => ((await client.request("hanging")) as { ids: string[] }).ids;
    const controller = new AbortController();
    const aborted = client.embed({ input: "hang" }, { signal: controller.signal }).catch((e) => e);
    expect(await hanging()).toHaveLength(1);
    controller.abort();
    expect((await aborted).code).toBe("cancelled");
    expect(await hanging()).toEqual([]);
    // Past its time limit (a short call's: requestTimeoutMs, or timeoutMs): rejected, and cancelled there.
    const late = await client.embed({ input: "hang" }, { timeoutMs: 100 }).catch((e) => e);
    expect(late.code).toBe("timeout");
    await Bun.sleep(100);
    expect(await hanging()).toEqual([]);
  });
});

describe("client.embed, aborted as its answer comes", () => {
  // A host embedding as its user types aborts the last embed: the core had answered it as the
  // cancel crossed it, and the abort resolved with vectors for the text typed past.
  test("an embed the host aborted rejects cancelled, even when the core answered it first", async () => {
    const client = await startClient();
    const controller = new AbortController();
    const embed = client.embed({ input: "crossing" }, { signal: controller.signal }).catch((e) => e);
    // The core has read it.
    await client.request("hanging");
    controller.abort();
    expect((await embed).code).toBe("cancelled");
  });
});
