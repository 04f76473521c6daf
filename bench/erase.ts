/**
 * An erase's cost by how FTS5 forgets the words (docs/agent.md "The store", store/db/fts-forget.ts),
 * on copies of one database, the two sides alternating pair by pair so both see the same drift:
 * - baseline: the erase as it was, one transaction with FTS5's secure-delete row by row (the
 *   statements `deleteRows` runs, word for word, under the erase's record);
 * - current: `eraseUser`/`eraseSession` as the core runs them (a merge of the index when the
 *   erase is at least BULK_SHARE of it).
 * Three cases: a user who is half of the index (`users.delete` of a year of chats); one session of
 * 50 messages in an index of 10,000 (75 rows of 15,000: at BULK_SHARE, merged); the same in an
 * index of 20,000 (under it: row by row on both sides, which should cost the same).
 *
 * Then the rewrite of every page an explicit erase ends with (store/erase.ts rewritePages, VACUUM):
 * one session of 50 messages erased from 10,000 messages plus 0, 100 and 500 MB of another user's
 * images, with and without the rewrite (absolute ms: it grows with the whole database).
 *
 *   bun bench/erase.ts [--pairs N]     (N pairs a case, 3 by default; ~3 minutes)
 */
import { Database } from "bun:sqlite";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deleteRows, eraseSession, eraseUser, settleErase } from "../src/store/erase.ts";
import { recordErasure } from "../src/store/erasures.ts";
import { Store } from "../src/store/store.ts";
import { median } from "./overhead/stream-timing.ts";

const args = process.argv.slice(2);
const pairsAt = args.indexOf("--pairs");
const PAIRS = pairsAt >= 0 ? Math.max(1, Number(args[pairsAt + 1]) || 3) : 3;

let seed = 7;
const word = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed.toString(36);
};
const prose = (n: number) => Array.from({ length: n }, word).join(" ");

/** `sessions` sessions of 25 turns (a question of 80 words, an answer of 240), alternating two users. */
function template(dir: string, sessions: number): string {
  const store = Store.open(dir, { chunkThread: false, firstSweepMs: 1e9 });
  for (let s = 0; s < sessions; s++)
    for (let t = 0; t < 25; t++)
      store.conversations.commitTurn({
        userId: s % 2 ? "ann" : "bob",
        sessionId: `s${s}`,
        agent: "a",
        at: new Date(),
        messages: [
          { role: "user", content: prose(80) },
          { role: "assistant", content: prose(240) },
        ],
        memoryText: prose(80),
      });
  store.close();
  return join(dir, "local-ai.db");
}

/** The erase as it was: the same deletes, FTS5's secure-delete row by row. */
function baseline(db: Database, userId: string, sessionId?: string): void {
  const where = sessionId === undefined ? "user_id = ?" : "user_id = ? AND session_id = ?";
  const a = sessionId === undefined ? [userId] : [userId, sessionId];
  db.transaction(() => {
    recordErasure(db, userId, sessionId, Date.now());
    db.query(`DELETE FROM memory WHERE ${where}`).run(...a);
    db.query(`DELETE FROM session_leases WHERE ${where}`).run(...a);
    db.query(`DELETE FROM sessions WHERE ${where}`).run(...a);
  }).immediate();
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
}

function timed(file: string, dir: string, run: (db: Database) => void): number {
  const copy = join(dir, `copy-${Math.random().toString(36).slice(2)}.db`);
  copyFileSync(file, copy);
  const db = new Database(copy);
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA secure_delete = ON");
  db.run("PRAGMA foreign_keys = ON");
  const t0 = performance.now();
  run(db);
  const ms = performance.now() - t0;
  db.close();
  for (const f of [copy, `${copy}-wal`, `${copy}-shm`]) rmSync(f, { force: true });
  return ms;
}

const root = mkdtempSync(join(tmpdir(), "local-ai-bench-erase-"));
try {
  const cases = [
    { name: "users.delete, half of 2,000 messages", sessions: 40, user: "ann", session: undefined },
    { name: "sessions.delete, 50 of 10,000 messages", sessions: 200, user: "ann", session: "s1" },
    { name: "sessions.delete, 50 of 20,000 messages", sessions: 400, user: "ann", session: "s1" },
  ];
  for (const c of cases) {
    const file = template(mkdtempSync(join(root, "t-")), c.sessions);
    const sides = { baseline: [] as number[], current: [] as number[] };
    for (let p = 0; p < PAIRS; p++) {
      for (const side of p % 2 === 0
        ? (["baseline", "current"] as const)
        : (["current", "baseline"] as const)) {
        sides[side].push(
          timed(file, root, (db) => {
            if (side === "baseline") baseline(db, c.user, c.session);
            else if (c.session === undefined) eraseUser(db, c.user, Date.now());
            else eraseSession(db, c.user, c.session, Date.now());
          }),
        );
      }
    }
    const b = median(sides.baseline);
    const n = median(sides.current);
    console.log(
      `${c.name}: baseline ${b.toFixed(0)} ms, current ${n.toFixed(0)} ms, current/baseline ${(n / b).toFixed(3)} (medians of ${PAIRS} pairs)`,
    );
  }
  rewriteCost(template(mkdtempSync(join(root, "t-")), 200));
} finally {
  rmSync(root, { recursive: true, force: true });
}

/** `mb` MB of images of bob's session s0 added to the database, in parts of 1 MB as the store keeps them. */
function addImages(file: string, mb: number): void {
  const db = new Database(file);
  db.transaction(() => {
    const { id } = db
      .query(`INSERT INTO attachments (user_id, session_id, mime, bytes, created_at)
              VALUES ('bob', 's0', 'image/png', ?, 0) RETURNING id`)
      .get(mb * 2 ** 20) as { id: number };
    const part = db.query("INSERT INTO attachment_data (id, part, user_id, data) VALUES (?, ?, 'bob', ?)");
    for (let i = 0; i < mb; i++) part.run(id, i, crypto.getRandomValues(new Uint8Array(2 ** 20)));
  })();
  db.close();
}

function rewriteCost(file: string): void {
  // Each size adds to the one before: 0, then 100, then 500 MB in all.
  for (const [added, mb] of [
    [0, 0],
    [100, 100],
    [500, 400],
  ] as const) {
    if (mb > 0) addImages(file, mb);
    const sides = { without: [] as number[], with: [] as number[] };
    for (let p = 0; p < PAIRS; p++) {
      sides.with.push(timed(file, root, (db) => eraseSession(db, "ann", "s1", Date.now())));
      sides.without.push(
        timed(file, root, (db) => {
          db.transaction(() => {
            recordErasure(db, "ann", "s1", Date.now());
            deleteRows(db, "ann", "s1");
          }).immediate();
          settleErase(db);
        }),
      );
    }
    console.log(
      `sessions.delete, 50 of 10,000 messages and ${added} MB of images: without the rewrite ${median(sides.without).toFixed(0)} ms, with it ${median(sides.with).toFixed(0)} ms (medians of ${PAIRS})`,
    );
  }
}
