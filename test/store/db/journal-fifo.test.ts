import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const SRC = resolve(import.meta.dir, "../../../src/store/db");

// SQLite's first read of a database looks for a hot rollback journal at `<db>-journal` and, when
// the name exists, opens it read-only without O_NONBLOCK: a FIFO there blocked that open for good,
// the read-only FTS look (migrate-ahead.ts) and the store's open alike, on the main loop. In a
// child with a deadline, since a blocked open cannot be interrupted in this process.
describe.skipIf(process.platform === "win32")("a FIFO at the database's -journal", () => {
  test("the FTS look and the store's open answer at once, neither waiting on it", () => {
    using dir = tmpdir();
    const opened = openStore(dir.path);
    opened.db.run("DELETE FROM meta WHERE key = 'fts_roles_checked'");
    opened.db.close();
    execFileSync("mkfifo", [join(dir.path, `${DB_FILE}-journal`)]);
    const script = `
      const { migrationPending } = require(${JSON.stringify(`${SRC}/migrate-ahead.ts`)});
      const { openStore } = require(${JSON.stringify(`${SRC}/open.ts`)});
      const dir = ${JSON.stringify(dir.path)};
      console.log("look", migrationPending(dir));
      try { openStore(dir).db.close(); console.log("open ok"); }
      catch (err) { console.log("open refused", err.data?.problem); }`;
    const run = Bun.spawnSync([process.execPath, "-e", script], { timeout: 10_000 });
    expect(run.stdout.toString().trim().split("\n")).toEqual(["look false", "open refused ENOTFILE"]);
  });
});
