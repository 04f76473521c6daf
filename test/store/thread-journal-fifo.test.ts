import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { join } from "node:path";
import { ChunkThread } from "../../src/store/chunk-thread.ts";
import { DB_FILE, openStore } from "../../src/store/db/open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** Opening the FIFO to write lets a reader blocked in its open go on (to EOF): no thread left held. */
function release(fifo: string): void {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // ENXIO: no reader waits on it.
  }
}

// The store's threads open their own connection after the main one, and SQLite's first read on it
// looks for a hot journal: a FIFO planted at `-journal` once the main open had looked held that
// open for good (seen here: the second connection of a process never answered), and with it every
// documents.add, delete and sessions.search after it. The thread refuses it as the main open does.
describe.skipIf(process.platform === "win32")("a FIFO at -journal planted after the store's open", () => {
  test("the thread's own open refuses it by name instead of waiting on it", async () => {
    using dir = tmpdir();
    const opened = openStore(dir.path);
    const path = join(dir.path, DB_FILE);
    const fifo = `${path}-journal`;
    execFileSync("mkfifo", [fifo]);
    const thread = new ChunkThread(path, 0);
    // Only a regression ever meets this deadline (the thread then blocked in open()).
    let deadline: ReturnType<typeof setTimeout> | undefined;
    const stuck = new Promise((resolve) => {
      deadline = setTimeout(() => resolve("blocked"), 10_000);
    });
    try {
      const asked = thread.search(true, "u", "hello", 5).then(
        () => "answered",
        (err) => err,
      );
      const got = await Promise.race([asked, stuck]);
      expect(got).toMatchObject({ code: "internal_error", data: { file: fifo, problem: "ENOTFILE" } });
    } finally {
      clearTimeout(deadline);
      release(fifo);
      thread.stop();
      opened.db.close();
    }
  });
});

// The database's own name replaced by a FIFO after the main open (a file replaced under the core:
// docs/agent.md "Removed while the core runs"): of mode 0444 it held the thread's open as at the
// main open (store/db/ownership.ts); made writable here, it read as a disk error.
describe.skipIf(process.platform === "win32")(
  "the database replaced by a FIFO after the store's open",
  () => {
    test("the thread's own open refuses it by name", async () => {
      using dir = tmpdir();
      const opened = openStore(dir.path);
      const path = join(dir.path, DB_FILE);
      const thread = new ChunkThread(path, 0);
      try {
        execFileSync("rm", ["-f", path]);
        execFileSync("mkfifo", ["-m", "600", path]);
        const got = await thread.search(true, "u", "hello", 5).then(
          () => "answered",
          (err) => err,
        );
        expect(got).toMatchObject({ code: "internal_error", data: { file: path, problem: "ENOTFILE" } });
      } finally {
        release(path);
        thread.stop();
        opened.db.close();
      }
    });
  },
);
