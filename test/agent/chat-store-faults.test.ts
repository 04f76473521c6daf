import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { INPUT_APART_CHARS } from "../../src/store/checkpoint.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { readDb } from "../fixtures/read-db.ts";
import { ChatHarness } from "./harness.ts";

// Issue 20's faults at the chat: a full disk and a database another process holds locked fail
// the chat with an error naming the database, and nothing already stored is lost.
const dbOf = (h: ChatHarness) => (h.services.store() as unknown as { db: Database }).db;

describe("chat: the database refuses a write", () => {
  test("a full disk: internal_error naming the database and SQLITE_FULL; the earlier turns stay", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    const db = dbOf(h);
    const pages = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
    db.run(`PRAGMA max_page_count = ${pages}`); // as a disk with no room left would
    // `max_page_count` binds this connection only: an input kept apart would have its first
    // checkpoint written by the store's thread, whose connection still has room.
    const { terminal } = await h.chat("2", { input: "x".repeat(INPUT_APART_CHARS), session_id: "s" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { path: join(h.dataDir, DB_FILE), problem: expect.stringMatching(/^SQLITE_FULL/) },
    });
    expect(terminal.message).toContain("no space left on the disk for the database");
    expect(terminal.message).toContain(join(h.dataDir, DB_FILE));
    db.run("PRAGMA max_page_count = 1073741823");
    expect(h.history("s")).toEqual([
      { role: "user", content: "first" },
      { role: "assistant", content: "kept" },
    ]);
    // Room again: the session goes on.
    h.llama.script({ content: ["again"] });
    expect((await h.chat("3", { input: "more", session_id: "s" })).terminal.type).toBe("result");
  });

  test("a database that cannot be written (read-only): internal_error naming it; the earlier turns stay", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    // As a read-only file or mount would (root ignores file modes, so the test asks SQLite).
    dbOf(h).run("PRAGMA query_only = 1");
    const { terminal } = await h.chat("2", { input: "second", session_id: "s" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { path: join(h.dataDir, DB_FILE), problem: expect.stringMatching(/^SQLITE_READONLY/) },
    });
    expect(terminal.message).toContain("cannot be written");
    dbOf(h).run("PRAGMA query_only = 0");
    expect(h.history("s")).toHaveLength(2);
  });

  test("another process holding the write lock: a clear error at once, not a hang; ping still answers", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    const other = new Database(join(h.dataDir, DB_FILE));
    other.run("BEGIN IMMEDIATE");
    try {
      const t0 = Date.now();
      h.send("p", "ping");
      const { terminal } = await h.chat("2", { input: "second", session_id: "s" });
      expect(terminal).toMatchObject({ type: "error", code: "internal_error" });
      expect(terminal.message).toContain("holds the database");
      expect(Date.now() - t0).toBeLessThan(6000);
      expect((await h.terminal("p")).result).toEqual({ status: "ok" });
    } finally {
      other.run("ROLLBACK");
      other.close();
    }
    expect(h.history("s")).toHaveLength(2);
  }, 20_000);
});

describe("chat: the database refuses the turn's last writes", () => {
  // Seen on a real full tmpfs through the compiled core: the commit failed, then so did the
  // lease's release (a DELETE needs room in the log too); its throw replaced the named error
  // with "see the core's log" and skipped the session lock's release, so every later chat of
  // the session waited forever (the core had to be restarted). Read-only stands in for full
  // here: both refuse the commit and the release alike.
  test("a write refused mid-stream: the error names the database; the session serves again once writable", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    h.llama.script({ content: Array(40).fill(" word"), chunk_delay_ms: 10 });
    h.send("2", "chat", { input: "second", session_id: "s" });
    await h.waitFor((m) => m.id === "2" && m.event === "llm_chunk");
    dbOf(h).run("PRAGMA query_only = 1");
    const terminal = await h.terminal("2");
    dbOf(h).run("PRAGMA query_only = 0");
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { path: join(h.dataDir, DB_FILE), problem: expect.stringMatching(/^SQLITE_READONLY/) },
    });
    expect(h.history("s")).toHaveLength(2);
    h.llama.script({ content: ["again"] });
    h.send("3", "chat", { input: "third", session_id: "s" });
    const next = await Promise.race([h.terminal("3"), Bun.sleep(5000).then(() => undefined)]);
    expect(next?.type).toBe("result");
    expect(h.history("s")).toHaveLength(4);
  }, 20_000);
});

describe("chat: the data folder removed or replaced while the core runs", () => {
  // Seen through the compiled core: SQLite kept writing to the file it had open, so after
  // `rm -rf` of the data folder (or a file put in its place) every chat still answered ok into
  // no file, lost at the next start, and sessions.list still showed the removed sessions.
  test("removed: the next request opens a new database at the path, and what it commits is there", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    rmSync(h.dataDir, { recursive: true, force: true });
    h.llama.script({ content: ["anew"] });
    expect((await h.chat("2", { input: "second", session_id: "s" })).terminal.type).toBe("result");
    expect(h.history("s")).toEqual([
      { role: "user", content: "second" },
      { role: "assistant", content: "anew" },
    ]);
    const onDisk = readDb(join(h.dataDir, DB_FILE));
    try {
      expect(onDisk.query("SELECT COUNT(*) AS n FROM messages").get()).toEqual({ n: 2 });
    } finally {
      onDisk.close();
    }
  });

  test("a file in its place: the chat names the folder and the problem, as at a start", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["kept"] });
    await h.chat("1", { input: "first", session_id: "s" });
    rmSync(h.dataDir, { recursive: true, force: true });
    writeFileSync(h.dataDir, "a file now");
    const { terminal } = await h.chat("2", { input: "second", session_id: "s" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { key: "app.data_dir", path: h.dataDir },
    });
    expect(terminal.message).toContain(`${h.dataDir} is a file, not a folder`);
    h.send("3", "sessions.list", {});
    expect(await h.terminal("3")).toMatchObject({
      type: "error",
      data: { key: "app.data_dir", path: h.dataDir },
    });
    rmSync(h.dataDir);
  });
});
