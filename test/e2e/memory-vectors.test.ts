import { describe, expect, test } from "bun:test";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { readDb } from "../fixtures/read-db.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Memory with vectors from the compiled binary (docs/agent.md "Memory"; issue 29): the stand-in's
// embedding server (recordings 96, 111–119) beside its chat server. The stand-in's vectors carry
// no meaning, so this checks the mechanics: a question sharing no word with a stored turn
// recalls it only when the embedding model is on, once the background job has embedded it.

const STORED = "My cat Mittens adores salmon";
const QUESTION = "which fish feeds our kitten";

async function recallAfter(embedding: boolean): Promise<{ hits: number; prompt: string; status: any }> {
  await using dir = tmpdir();
  writeGguf(dir.path, "embed.gguf", bertModel());
  const stack = writeStack(dir.path, {
    script: [{ content: "noted" }, { content: "salmon, I recall" }],
    extraYaml: [
      ...(embedding ? ["  embedding_model: embed"] : []),
      "models:",
      "  - {name: embed, path: ./embed.gguf, kind: embedding}",
    ].join("\n"),
  });
  await using core = spawnCore({ cwd: dir.path, env: stack.env });
  await core.request({ id: 0, method: "initialize" });
  const first = await core.request(
    { id: 1, method: "chat", params: { input: STORED, session_id: "s1" } },
    30_000,
  );
  expect(first.result?.response).toBe("noted");
  let status: any;
  if (embedding) {
    // The turn's row is embedded in the background after its result.
    for (let i = 0; ; i++) {
      status = (await core.request({ id: `st${i}`, method: "status" })).result;
      const index = status.memory_index;
      if (index?.total >= 1 && index.embedded === index.total) break;
      if (i > 300) throw new Error(`not embedded: ${JSON.stringify(index)}`);
      await Bun.sleep(100);
    }
  } else status = (await core.request({ id: "st", method: "status" })).result;
  const ask = await core.request(
    { id: 2, method: "chat", params: { input: QUESTION, session_id: "s2" } },
    30_000,
  );
  expect(ask.result?.response).toBe("salmon, I recall");
  const done = core.messages.find((m: any) => m.id === 2 && m.type === "event" && m.event === "memory_done");
  const sent = stack.llamaRequests().at(-1);
  await core.request({ id: "bye", method: "shutdown" });
  expect(await core.exited()).toBe(0);
  return { hits: done?.hits ?? -1, prompt: JSON.stringify(sent?.messages ?? []), status };
}

describe.skipIf(process.platform === "win32")("memory with an embedding model (compiled core)", () => {
  test("a question worded unlike the stored turn recalls it only with the embedding model on", async () => {
    const off = await recallAfter(false);
    expect(off.hits).toBe(0);
    expect(off.prompt).not.toContain("Mittens");
    expect(off.status.memory_index).toBeNull();

    const on = await recallAfter(true);
    expect(on.status.memory_index).toEqual({
      embedded: 1,
      total: 1,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    expect(on.hits).toBe(1);
    expect(on.prompt).toContain("Mittens");
  }, 120_000);
});

describe.skipIf(process.platform === "win32")("a changed embedding model (compiled core)", () => {
  test("the next core embeds every row again under the new model's fingerprint, status showing it", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      script: [{ content: "one" }, { content: "two" }],
      extraYaml: [
        "  embedding_model: embed",
        "models:",
        "  - {name: embed, path: ./embed.gguf, kind: embedding}",
      ].join("\n"),
    });
    const fingerprints = () => {
      const db = readDb(join(stack.dataDir, "local-ai.db"));
      try {
        return (
          db.query("SELECT DISTINCT fingerprint AS f FROM memory_vectors").all() as { f: string }[]
        ).map((r) => r.f);
      } finally {
        db.close();
      }
    };
    const session = async (input: string, session_id: string, total: number) => {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      await core.request({ id: 0, method: "initialize" });
      await core.request({ id: 1, method: "chat", params: { input, session_id } }, 30_000);
      const index = await embeddedAll(core, total);
      await core.request({ id: "bye", method: "shutdown" });
      expect(await core.exited()).toBe(0);
      return index;
    };
    expect(await session("first note", "a", 1)).toEqual({
      embedded: 1,
      total: 1,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    const before = fingerprints();
    expect(before).toHaveLength(1);
    // Another model file in the same place (here: the same bytes, a new modification time).
    utimesSync(join(dir.path, "embed.gguf"), new Date(), new Date(Date.now() + 5_000));
    expect(await session("second note", "b", 2)).toEqual({
      embedded: 2,
      total: 2,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    const after = fingerprints();
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before[0]);
  }, 120_000);
});

/** status.memory_index once `total` rows are all embedded. */
async function embeddedAll(core: ReturnType<typeof spawnCore>, total: number): Promise<unknown> {
  for (let i = 0; ; i++) {
    const index = (await core.request({ id: `st${i}`, method: "status" })).result.memory_index;
    if (index?.total === total && index.embedded === total) return index;
    if (i > 300) throw new Error(`not embedded: ${JSON.stringify(index)}`);
    await Bun.sleep(100);
  }
}

describe.skipIf(process.platform === "win32")("a document with an embedding model (compiled core)", () => {
  test("documents.add embeds its chunks before it answers; a question sharing no word with it cites it", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      script: [{ content: "the left cupboard" }],
      extraYaml: [
        "  embedding_model: embed",
        "models:",
        "  - {name: embed, path: ./embed.gguf, kind: embedding}",
      ].join("\n"),
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    await core.request({ id: 0, method: "initialize" });
    const added = await core.request(
      {
        id: 1,
        method: "documents.add",
        params: { text: "The kettle lives in the left cupboard.", name: "home.md" },
      },
      30_000,
    );
    expect(added.result).toMatchObject({ name: "home.md", chunks: 1 });
    // Embedded by documents.add itself (Services.embedChunks), not left to the background job.
    const db = readDb(join(stack.dataDir, "local-ai.db"));
    const vectors = db
      .query(
        "SELECT count(*) AS n FROM memory_vectors v JOIN memory m ON m.id = v.memory_id WHERE m.document_id = ?",
      )
      .get(added.result.document_id) as { n: number };
    db.close();
    expect(vectors.n).toBe(1);
    const ask = await core.request(
      { id: 2, method: "chat", params: { input: "where should I look for tea things", session_id: "s" } },
      30_000,
    );
    expect(ask.result?.sources).toEqual([
      expect.objectContaining({ kind: "document", id: added.result.document_id, name: "home.md", chunk: 0 }),
    ]);
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 120_000);
});

describe.skipIf(process.platform === "win32")(
  "a memory folder written to while the core runs (compiled core)",
  () => {
    test("a file added is indexed and embedded without a restart or a chat", async () => {
      await using dir = tmpdir();
      writeGguf(dir.path, "embed.gguf", bertModel());
      const notes = join(dir.path, "notes");
      mkdirSync(notes);
      writeFileSync(join(notes, "first.md"), "The kettle lives in the left cupboard.");
      const stack = writeStack(dir.path, {
        extraYaml: [
          "  embedding_model: embed",
          `  folders: [${JSON.stringify(notes)}]`,
          "models:",
          "  - {name: embed, path: ./embed.gguf, kind: embedding}",
        ].join("\n"),
      });
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      await core.request({ id: 0, method: "initialize" });
      expect(await embeddedAll(core, 1)).toEqual({
        embedded: 1,
        total: 1,
        model: "embed",
        set_aside: 0,
        last_set_aside: null,
      });
      // The watch walks the folder again (store/folder-index.ts), and the embedder is told.
      writeFileSync(join(notes, "second.md"), "The teapot sits on the top shelf.");
      expect(await embeddedAll(core, 2)).toEqual({
        embedded: 2,
        total: 2,
        model: "embed",
        set_aside: 0,
        last_set_aside: null,
      });
      await core.request({ id: "bye", method: "shutdown" });
      expect(await core.exited()).toBe(0);
    }, 120_000);
  },
);
