import { describe, expect, test } from "bun:test";
import { BULK_SHARE } from "../../../src/store/db/fts-forget.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { threadErases } from "../../fixtures/interleave.ts";
import { commitNotedTurn } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/**
 * An erase runs on the store's thread (store/erase-work.ts): FTS5's `secure-delete` makes one of
 * a few hundred long messages cost seconds, which the main loop must not wait out.
 */
const TURNS = Number(process.env.ERASE_TURNS ?? 40);
/** The session's rows (3 a turn) under BULK_SHARE of the index. */
const FILLER_ROWS = Math.ceil((TURNS * 3) / BULK_SHARE) + 1000;

function words(seed: number, n: number): string {
  // Many distinct terms: what FTS5's secure-delete pays for, per term, per row.
  let out = "";
  for (let i = 0; i < n; i++) out += `w${((seed * 7919 + i * 104729) % 50000).toString(36)} `;
  return out;
}

/**
 * Small rows of another user, so that the erase below is under BULK_SHARE of the index and goes
 * row by row through FTS5's secure-delete, as an erase of one session in a big database does
 * (store/db/fts-forget.ts).
 */
function bigIndex(store: Store, rows: number): void {
  const doc = { documentId: "filler", userId: "bob", sessionId: "", since: 0, at: Date.now() };
  for (let i = 0; i < rows; i += 1000)
    store.documents.addChunks(
      doc,
      Array.from({ length: Math.min(1000, rows - i) }, (_, k) => ({ index: i + k, text: `filler ${k % 7}` })),
    );
  store.documents.commit(doc, { name: "filler.txt", format: "text", chunks: rows, bytes: rows });
}

/** `work`'s value and how long it took. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; tookMs: number }> {
  const started = performance.now();
  const value = await work();
  return { value, tookMs: performance.now() - started };
}

const aboutTurn = (store: Store, u: string, s: string, text: string) =>
  commitNotedTurn(store, u, s, text, `about ${text}`);

describe("an erase off the main loop", () => {
  test("sessions.delete of a long session: the loop keeps turning, a write of this core waits for it, nothing is left on disk", async () => {
    using dir = tmpdir();
    // A short busy wait: a write that did not wait for the erase would fail with SQLITE_BUSY.
    const store = Store.open(dir.path, { busyWaitMs: 200 });
    bigIndex(store, FILLER_ROWS);
    for (let i = 0; i < TURNS; i++) aboutTurn(store, "alice", "big", `PANGOLIN ${i} ${words(i, 700)}`);
    aboutTurn(store, "alice", "keep", "kept");
    using erases = threadErases();
    const { value, tookMs } = await timed(() =>
      Promise.all([
        store.deleteSession("alice", "big"),
        // Once the erase holds the write lock on its thread.
        Bun.sleep(300).then(() =>
          store.write(() => aboutTurn(store, "alice", "keep", "written during the erase")),
        ),
      ]),
    );
    expect(value[0].deleted).toBe(true);
    // The erase was long enough to matter, and the loop never waited on it: it ran on the store's
    // thread, and a ping queued once it was handed over had its turn before the answer.
    expect(tookMs).toBeGreaterThan(500);
    expect(erases.seen.map((e) => e.kind)).toContain("session");
    expect(erases.seen.find((e) => e.kind === "session")?.pings).toBeGreaterThan(0);
    expect(store.get("alice", "keep", 10).messages.map((m) => m.content)).toContain(
      "written during the erase",
    );
    expect(store.list("alice", 10).sessions.map((s) => s.session_id)).toEqual(["keep"]);
    expect(filesHolding(dir.path, "PANGOLIN")).toEqual([]);
    await store.stop();
  }, 30_000);

  test("a second core opening the folder during the erase lists its sessions at once (an open of a current database writes nothing)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    bigIndex(store, FILLER_ROWS);
    for (let i = 0; i < TURNS; i++) aboutTurn(store, "alice", "big", `PANGOLIN ${i} ${words(i, 700)}`);
    aboutTurn(store, "alice", "keep", "kept");
    const erasing = store.deleteSession("alice", "big");
    await Bun.sleep(300);
    const started = performance.now();
    const second = Store.open(dir.path);
    const opened = performance.now() - started;
    // A backstop, generous for a loaded machine: an open that waited for the erase's lock would
    // see the erase committed, which the snapshot below shows.
    expect(opened).toBeLessThan(2500);
    // Its snapshot is from before the erase's commit: both sessions are still there.
    expect(
      second
        .list("alice", 10)
        .sessions.map((s) => s.session_id)
        .sort(),
    ).toEqual(["big", "keep"]);
    second.close();
    expect((await erasing).deleted).toBe(true);
    await store.stop();
  }, 30_000);

  test("an edit at the start of a long session (its tail erased): the loop keeps turning, the history and the index are the new ones", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    bigIndex(store, FILLER_ROWS);
    for (let i = 0; i < TURNS; i++) aboutTurn(store, "alice", "big", `PANGOLIN ${i} ${words(i, 700)}`);
    // Read once, so the main connection's cached history is the old one.
    expect(store.conversations.history("alice", "big")).toHaveLength(TURNS * 2);
    using erases = threadErases();
    const { tookMs } = await timed(() =>
      store.writeOffLoop({
        kind: "commit",
        turn: {
          userId: "alice",
          sessionId: "big",
          agent: "a",
          messages: [
            { role: "user", content: "edited question" },
            { role: "assistant", content: "new answer" },
          ],
          replaceFromSeq: 0,
          at: new Date(),
        },
      }),
    );
    expect(tookMs).toBeGreaterThan(500);
    expect(erases.seen.map((e) => e.kind)).toEqual(["commit"]);
    expect(erases.seen[0]?.pings).toBeGreaterThan(0);
    expect(store.conversations.history("alice", "big").map((m) => m.content)).toEqual([
      "edited question",
      "new answer",
    ]);
    expect(await store.search("alice", "PANGOLIN", 5)).toEqual([]);
    await store.stop();
  }, 30_000);

  test("an edit of a session deleted since its turn began is refused from the store's thread as on the loop (session_deleted)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    aboutTurn(store, "alice", "s", "first");
    const since = store.conversations.erasureMark();
    await store.deleteSession("alice", "s");
    const edit = store.writeOffLoop({
      kind: "commit",
      turn: {
        userId: "alice",
        sessionId: "s",
        agent: "a",
        messages: [{ role: "user", content: "late" }],
        replaceFromSeq: 0,
        at: new Date(),
        since,
      },
    });
    const refused = (await edit.then(
      () => undefined,
      (err: unknown) => err,
    )) as { code?: string; data?: { reason?: string } } | undefined;
    expect([refused?.code, refused?.data?.reason]).toEqual(["cancelled", "session_deleted"]);
    expect(store.list("alice", 10).sessions).toEqual([]);
    await store.stop();
  });
});
