import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A store the core closed while a request still held it (services.ts dropStore: the database
// removed, replaced or writable again; docs/agent.md, The store, "Removed while the core runs").
// Its thread (store/chunk-thread.ts) started a fresh worker for the next erase or add, which
// nothing ever stopped: a thread and a connection held for the life of the process, writing
// through a store that was closed.
describe("a closed store's thread", () => {
  test("refuses work after the close, naming the database, instead of starting a worker", async () => {
    await using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.commitTurn({
      userId: "u",
      sessionId: "s",
      agent: "a",
      messages: [{ role: "user", content: "kept" }],
      at: new Date(),
    });
    store.close();
    let refused: unknown;
    try {
      await store.deleteSession("u", "s");
    } catch (err) {
      refused = err;
    }
    expect(refused).toMatchObject({
      code: "internal_error",
      data: { key: "app.data_dir", path: join(dir.path, "local-ai.db") },
    });
    expect((refused as Error).message).toContain("was closed while this request ran");
    const again = Store.open(dir.path);
    try {
      expect(again.conversations.session("u", "s")).toBeDefined();
    } finally {
      again.close();
    }
  });

  // A turn in flight when its data folder went: its commit and reads met "Cannot use a closed
  // database", an unnamed internal_error with a stack in the log (a reviewer's rm -rf mid-chat).
  test("a read or a write on the loop after the close is named too", async () => {
    await using dir = tmpdir();
    const store = Store.open(dir.path);
    store.close();
    const named = (err: unknown) => {
      expect(err).toMatchObject({ code: "internal_error", data: { key: "app.data_dir" } });
      expect((err as Error).message).toContain("was closed while this request ran");
    };
    let read: unknown;
    try {
      store.list("u", 10);
    } catch (err) {
      read = err;
    }
    named(read);
    let written: unknown;
    try {
      await store.write(() => store.conversations.clearCheckpoint("u", "s"));
    } catch (err) {
      written = err;
    }
    named(written);
  });
});
