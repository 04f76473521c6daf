import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { ChunkThread } from "../../src/store/chunk-thread.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { LIKE_PAGE_ROWS, searchSessions } from "../../src/store/session-search.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const TURNS = 8;
const PER_TURN = LIKE_PAGE_ROWS;

/**
 * User u's TURNS turns of PER_TURN messages each, every one saying 寿司 (a word the LIKE match
 * reads: the index cannot find it inside a sentence), turn k at time k; another user's too.
 */
function manyMessages(folder: string): Database {
  const store = Store.open(folder, { chunkThread: false });
  for (const user of ["u", "other"])
    for (let k = 0; k < TURNS; k++)
      store.conversations.commitTurn({
        userId: user,
        sessionId: `s${k}`,
        agent: "plain",
        messages: Array.from({ length: PER_TURN }, (_, i) => ({
          role: i % 2 ? ("assistant" as const) : ("user" as const),
          content: `我喜欢吃寿司 k${k}m${i}q`,
        })),
        at: new Date(1_000 + k),
      });
  store.close();
  return new Database(join(folder, DB_FILE));
}

/** A `stopped` that counts its asks and says yes from the `from`-th on. */
function counted(from = Number.POSITIVE_INFINITY) {
  const c = { asked: 0, stopped: () => ++c.asked >= from };
  return c;
}

// A search with a word of an unspaced script is SQLite's LIKE over every message of the user:
// it matched and sorted them all before answering its first hit, whatever its `limit`.
test("the LIKE match stops once it has its hits, newest first, reading one page of a user's many messages", () => {
  using dir = tmpdir();
  const db = manyMessages(dir.path);
  const c = counted();
  const hits = searchSessions(db, true, "u", "寿司", 5, c.stopped);
  expect(hits.map((h) => [h.session_id, h.seq])).toEqual(
    [4, 3, 2, 1, 0].map((i) => [`s${TURNS - 1}`, PER_TURN - 5 + i]),
  );
  expect(hits[0]?.snippet).toContain("**寿司**");
  // Asked before the search and before its one page.
  expect(c.asked).toBe(2);
  // Hits across pages, in order: the newest turn's messages, then the one before.
  const across = searchSessions(db, true, "u", "寿司", PER_TURN + 2);
  expect(across.map((h) => h.session_id)).toEqual([
    ...Array(PER_TURN).fill(`s${TURNS - 1}`),
    `s${TURNS - 2}`,
    `s${TURNS - 2}`,
  ]);
  expect(across.slice(PER_TURN).map((h) => h.seq)).toEqual([PER_TURN - 1, PER_TURN - 2]);
  db.close();
});

test("a LIKE match with few hits reads every page, and a cancel stops it at the next page", () => {
  using dir = tmpdir();
  const db = manyMessages(dir.path);
  const all = counted();
  expect(searchSessions(db, true, "u", "寿司 k7m3q", 5, all.stopped).map((h) => h.session_id)).toEqual([
    "s7",
  ]);
  // Before the search, before each of its full pages, and before the last (found empty).
  expect(all.asked).toBe(1 + TURNS + 1);
  // Cancelled as its second page is about to be read.
  const c = counted(3);
  expect(() => searchSessions(db, true, "u", "寿司 nothing", 5, c.stopped)).toThrow(
    new CoreError("cancelled", "cancelled by the host"),
  );
  expect(c.asked).toBe(3);
  // Cancelled while it waited behind another search: nothing read.
  const queued = counted(1);
  expect(() => searchSessions(db, true, "u", "lighthouse", 5, queued.stopped)).toThrow(
    "cancelled by the host",
  );
  db.close();
});

test("a search cancelled on the store's thread is answered at once, and the thread answers the next one", async () => {
  using dir = tmpdir();
  manyMessages(dir.path).close();
  const thread = new ChunkThread(join(dir.path, DB_FILE), 100);
  const cancel = new AbortController();
  const searching = thread.search(true, "u", "寿司 nothing", 5, cancel.signal);
  const reason = new CoreError("cancelled", "cancelled by the host");
  cancel.abort(reason);
  let got: unknown;
  searching.catch((e) => {
    got = e;
  });
  // Rejected within this turn of the loop (its microtasks), before any answer of the thread can come.
  for (let i = 0; i < 10; i++) await null;
  expect(got).toBe(reason);
  expect((await thread.search(true, "u", "寿司 k3m4q", 5)).map((h) => h.session_id)).toEqual(["s3"]);
  // Already cancelled: never sent.
  await expect(thread.search(true, "u", "寿司", 5, cancel.signal)).rejects.toBe(reason);
  thread.stop();
});
