import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { reuseStore } from "../../src/server/reuse-store.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { StatementDatabase } from "../../src/store/db/statements.ts";
import { recordErasure } from "../../src/store/erasures.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Prompt reuse asks the store about each session still in a slot before a hand-over's request
// (agent/kv/reuse.ts handOver: llama-server moves the slot's tokens to its RAM cache as it takes
// the request up, and an erased or edited session's must not go there). It was a session-row
// query, a lease-row query and the erase mark's, on every warm chat's way (docs/performance.md,
// "The core's own path against 2026-12-05's build"): now one query, the erase checks' own
// lookups only when an erase came after the slot's mark. Counted, not timed.

const U = "u";

/** The statements the store asks for while `work` runs (each path asks `query` per execution). */
function queries(work: () => unknown): { asked: number; value: unknown } {
  const original = StatementDatabase.prototype.query;
  let asked = 0;
  const spy = spyOn(StatementDatabase.prototype, "query").mockImplementation(function (
    this: StatementDatabase,
    sql: string,
  ) {
    asked++;
    return original.call(this, sql);
  } as unknown as typeof original);
  try {
    const value = work();
    return { asked, value };
  } finally {
    spy.mockRestore();
  }
}

/** A session `s` of user U stored, and the erase mark once it was. */
function withSession(store: Store, s: string): number {
  store.conversations.ensureSession(U, s, "a", "hello", new Date(1_000));
  return store.conversations.erasureMark();
}

/**
 * An erase recorded as another core on the folder records it (its own connection); a session's
 * erase takes its row too (store/erase.ts does more, none of which the question reads).
 */
function erasedElsewhere(dir: string, s: string, edit: boolean | "set_aside"): void {
  const db = new Database(join(dir, DB_FILE));
  try {
    recordErasure(db, U, s, Date.now(), edit);
    if (edit === false) db.query("DELETE FROM sessions WHERE user_id = ? AND session_id = ?").run(U, s);
  } finally {
    db.close();
  }
}

describe("prompt reuse's question about a session in a slot", () => {
  test("is one store query when nothing was erased since the slot's mark", () => {
    using dir = tmpdir("local-ai-reuse-store-");
    const store = Store.open(dir.path);
    try {
      const mark = withSession(store, "s");
      const { stored } = reuseStore(() => store);
      const asked = queries(() => stored?.(U, "s", mark));
      expect(asked.value).toBe(true);
      expect(asked.asked).toBe(1);
      // A slot no turn here ended in (no mark): the row and the lease, one query too.
      expect(queries(() => stored?.(U, "s")).asked).toBe(1);
    } finally {
      store.close();
    }
  });

  test("still says no for an erased, edited, set-aside or taken-over session, yes past another's erase", async () => {
    using dir = tmpdir("local-ai-reuse-store-");
    const store = Store.open(dir.path);
    const other = Store.open(dir.path);
    try {
      const { stored } = reuseStore(() => store);
      const mark = withSession(store, "s");
      for (const s of ["edited", "aside", "taken", "gone"]) withSession(store, s);
      const since = store.conversations.erasureMark();
      // Another session's erase after the mark: the slot's session is untouched.
      erasedElsewhere(dir.path, "unrelated", false);
      expect(stored?.(U, "s", since)).toBe(true);
      erasedElsewhere(dir.path, "edited", true);
      expect(stored?.(U, "edited", since)).toBe(false);
      erasedElsewhere(dir.path, "aside", "set_aside");
      expect(stored?.(U, "aside", since)).toBe(false);
      // Before the edits (the slot's mark): unknown to the store, nothing to say against it.
      expect(stored?.(U, "edited")).toBe(true);
      // Another core holds its lease (it took the session over): this slot's turn is older.
      const held = await other.lease(U, "taken", AbortSignal.timeout(5000), () => undefined);
      expect(stored?.(U, "taken", since)).toBe(false);
      expect(stored?.(U, "taken")).toBe(false);
      held.release();
      // This core's own lease is no reason.
      const mine = await store.lease(U, "s", AbortSignal.timeout(5000), () => undefined);
      expect(stored?.(U, "s", since)).toBe(true);
      mine.release();
      erasedElsewhere(dir.path, "gone", false);
      expect(stored?.(U, "gone")).toBe(false);
      expect(stored?.(U, "gone", mark)).toBe(false);
      expect(stored?.(U, "missing")).toBe(false);
    } finally {
      other.close();
      store.close();
    }
  });
});
