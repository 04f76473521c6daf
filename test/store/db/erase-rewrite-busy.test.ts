import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { rewriteOwed, settleErase } from "../../../src/store/erase.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// An erase's page rewrite (store/erase.ts rewritePages) runs with the erase's short busy wait
// (20 ms): a write of another connection at that moment (a lease renewed or released on the main
// connection, another core on the folder) made the VACUUM fail SQLITE_BUSY, and the erase
// answered ok with its rewrite left owed (the erased bytes in page gaps until a later erase).
describe("an erase's page rewrite meets another connection's write", () => {
  test("it waits the write out and is done, not left owed", async () => {
    await using dir = tmpdir();
    const path = join(dir.path, "x.db");
    const db = new Database(path);
    db.run("PRAGMA journal_mode = WAL");
    db.run("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT");
    db.run("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
    for (let i = 0; i < 200; i++) db.run("INSERT INTO t (v) VALUES (?)", ["x".repeat(300)]);
    db.run("INSERT INTO meta (key, value) VALUES ('rewrite_owed', '1')");
    db.run("PRAGMA busy_timeout = 20");
    const holder = Bun.spawn(
      [
        process.execPath,
        "-e",
        `const { Database } = require("bun:sqlite"); const d = new Database(${JSON.stringify(path)});
         d.run("BEGIN IMMEDIATE"); d.run("INSERT INTO t (v) VALUES ('y')"); console.log("locked");
         Bun.sleepSync(300); d.run("COMMIT"); d.close();`,
      ],
      { stdout: "pipe" },
    );
    const reader = holder.stdout.getReader();
    let seen = "";
    while (!seen.includes("locked")) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += new TextDecoder().decode(value);
    }
    expect(seen).toContain("locked");
    expect(settleErase(db, true)).toBe(true);
    expect(rewriteOwed(db)).toBe(false);
    await holder.exited;
    db.close();
  });
});
