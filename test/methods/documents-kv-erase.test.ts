import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import { entryOf } from "../../src/agent/kv/kv-entry.ts";
import { documentsAdd, documentsDelete } from "../../src/methods/documents.ts";
import type { Services } from "../../src/methods/services.ts";
import { cancelledError } from "../../src/protocol/errors.ts";
import { Store } from "../../src/store/store.ts";
import { canMakeImmutable, makeImmutable, undoImmutable } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// documents.delete, like sessions.delete (test/methods/sessions-kv-erase.test.ts), never answers
// ok while a saved KV state quoting the document stays on disk, and a delete sent again tries it
// again (docs/protocol.md `documents.delete`; docs/agent.md#prompt-reuse). It used to answer
// `deleted: true` over such a file, and a delete sent again answered document_not_found only.
const canChattr = canMakeImmutable("documents-kv-erase");
// Here, not only in the test's finally: a test that timed out never reaches its finally.
afterEach(undoImmutable);

function services(deleted: boolean, left: string[], asked: string[]): Services {
  return {
    store: () => ({ deleteDocument: async () => deleted }),
    forgetKvSource: (user: string, source: string) => {
      asked.push(`${user} ${source}`);
      return left;
    },
    config: () => ({ app: { data_dir: "/" } }),
  } as unknown as Services;
}

async function run(s: Services): Promise<{ code?: string; data?: Record<string, unknown> } | unknown> {
  try {
    return await documentsDelete.run({ user_id: "u", document_id: "d1" } as never, {} as never, s);
  } catch (err) {
    return err;
  }
}

describe("a documents.delete whose saved KV state cannot be removed", () => {
  test("fails naming the file; sent again, it tries the files again and says the document is gone", async () => {
    const asked: string[] = [];
    const first = await run(services(true, ["/kv/x.bin"], asked));
    expect(first).toMatchObject({ code: "internal_error", data: { file: "/kv/x.bin" } });
    const again = await run(services(false, [], asked));
    expect(again).toMatchObject({ data: { reason: "document_not_found" } });
    expect(asked).toEqual(["u document:d1", "u document:d1"]);
    const stuck = await run(services(false, ["/kv/x.bin"], []));
    expect(stuck).toMatchObject({ code: "internal_error", data: { file: "/kv/x.bin" } });
    expect(await run(services(true, [], []))).toEqual({ deleted: true });
  });

  test.skipIf(!canChattr)(
    "a state that cannot be removed keeps its sidecar, so a delete sent again finds it",
    () => {
      using dir = tmpdir();
      const kv = new KvDisk(dir.path, 1 << 30);
      const name = kv.nameOf("u", "quoting");
      const bin = join(dir.path, `${name}.bin`);
      writeFileSync(bin, "tokens quoting the document");
      const prompt = {
        cut: 0,
        notes: [{ seq: 0, text: "Notes: …", ids: ["document:d1#0"], sources: ["document:d1"] }],
      };
      const entry = entryOf(
        { userId: "u", sessionId: "quoting" },
        "fp",
        { n_saved: 5, n_written: 27 },
        prompt,
        ["document:d1"],
        1,
      );
      writeFileSync(join(dir.path, `${name}.json`), `${JSON.stringify(entry)}\n`);
      expect(makeImmutable(bin)).toBe(true);
      try {
        expect(kv.unremovedBy(() => kv.removeSource("u", "document:d1"))).toEqual([bin]);
      } finally {
        undoImmutable();
      }
      expect(existsSync(join(dir.path, `${name}.json`))).toBe(true);
      expect(kv.unremovedBy(() => kv.removeSource("u", "document:d1"))).toEqual([]);
      expect(existsSync(bin)).toBe(false);
      expect(existsSync(join(dir.path, `${name}.json`))).toBe(false);
    },
  );
});

describe("a documents.add cancelled while its chunks are embedded", () => {
  test("takes the document out, and the saved KV state of a chat that recalled it meanwhile with it", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    const cancel = new AbortController();
    const asked: string[] = [];
    let id = "";
    const s = {
      store: () => store,
      // Committed before its vectors: a chat of the user recalls it by words now, and its KV
      // state, saved, quotes it (docs/agent.md#prompt-reuse). The host cancels meanwhile.
      embedChunks: async (_ids: number[], _progress: unknown, signal: AbortSignal) => {
        id = store.memory.search("u", "quokka", 1)[0]?.doc.source.replace("document:", "") ?? "";
        cancel.abort(cancelledError());
        signal.throwIfAborted();
      },
      forgetKvSource: (user: string, source: string) => {
        asked.push(`${user} ${source}`);
        return [];
      },
      kvZeroed: async () => {},
    } as unknown as Services;
    const ctx = { signal: cancel.signal, emit: () => {}, settle: () => !cancel.signal.aborted };
    const out = await Promise.resolve()
      .then(() =>
        documentsAdd.run({ user_id: "u", text: "a note about the quokka" } as never, ctx as never, s),
      )
      .catch((err: unknown) => err);
    expect(out).toMatchObject({ code: "cancelled" });
    expect(id).not.toBe("");
    expect(store.documents.find("u", id)).toBeUndefined();
    expect(asked).toEqual([`u document:${id}`]);
    await store.stop();
  });
});
