import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { ChatHarness } from "../../agent/harness.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { canMakeImmutable, makeImmutable, undoImmutable } from "../../fixtures/full-disk.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A database that could not be written for a while (docs/agent.md, The store: "Errors"): the
// store's thread (store/chunk-thread.ts) opens its own connection on its first erase or add,
// which SQLite opens read-only when the file cannot be written then; kept, it failed every later
// erase and add with SQLITE_READONLY until a restart, though the file was writable again (seen
// through the compiled core: sessions.delete refused for good). An immutable file (chattr +i)
// is read-only even to root; where chattr cannot set it (not root, a file system without it)
// the test says so and is skipped.
const canChattr = canMakeImmutable("readonly-db");

// Here, not only in the test's finally: a test that timed out never reaches its finally.
afterEach(undoImmutable);

describe("the store's thread after the database was read-only for a while", () => {
  test.skipIf(!canChattr)("erases again once the file can be written, without a restart", async () => {
    await using dir = tmpdir();
    const store = Store.open(dir.path);
    const files = ["local-ai.db", "local-ai.db-wal"].map((f) => join(dir.path, f));
    try {
      for (const s of ["s1", "s2"])
        store.conversations.commitTurn({
          userId: "u",
          sessionId: s,
          agent: "a",
          messages: [{ role: "user", content: `WRENCANARY ${s}` }],
          at: new Date(),
        });
      expect(makeImmutable(...files)).toBe(true);
      let refused: unknown;
      try {
        await store.deleteSession("u", "s1");
      } catch (err) {
        refused = err;
      } finally {
        undoImmutable();
      }
      expect((refused as { data?: { problem?: string } }).data?.problem).toStartWith("SQLITE_READONLY");
      expect((await store.deleteSession("u", "s1")).deleted).toBe(true);
      expect((await store.deleteSession("u", "s2")).deleted).toBe(true);
      expect(filesHolding(dir.path, "WRENCANARY")).toEqual([]);
    } finally {
      undoImmutable();
      store.close();
    }
  });
});

describe("a core started while the database was read-only", () => {
  // Seen through the compiled core: SQLite opened the file read-only for good, so every chat
  // failed with SQLITE_READONLY until a restart, though the file was writable again.
  test.skipIf(!canChattr)("chats again once the file can be written, without a restart", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    Store.open(h.dataDir).close();
    const db = join(h.dataDir, "local-ai.db");
    expect(makeImmutable(db)).toBe(true);
    try {
      h.llama.script({ content: ["refused"] });
      const { terminal } = await h.chat("1", { input: "first", session_id: "s" });
      expect(terminal).toMatchObject({
        type: "error",
        data: { problem: expect.stringMatching(/^SQLITE_READONLY/) },
      });
    } finally {
      undoImmutable();
    }
    h.llama.script({ content: ["kept"] });
    expect((await h.chat("2", { input: "second", session_id: "s" })).terminal.type).toBe("result");
    expect(h.history("s")).toHaveLength(2);
  });
});
