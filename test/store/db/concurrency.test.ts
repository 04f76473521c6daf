import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { SessionLeases } from "../../../src/store/session-lease.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const never = new AbortController().signal;

/** A turn's lease on session `id` of user "u", with nothing run inside it; resolves with its release. */
const lease = (store: Store, id: string, signal: AbortSignal) =>
  store.lease("u", id, signal, () => undefined).then((l) => l.release);

describe("two stores on one data folder", () => {
  test("a session's turn waits for the other holder, then runs; other sessions do not wait", async () => {
    using dir = tmpdir();
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    const releaseA = await lease(a, "s", never);
    let bHas = false;
    const waiting = lease(b, "s", never).then((r) => {
      bHas = true;
      return r;
    });
    const other = await lease(b, "t", never);
    other();
    await Bun.sleep(150);
    expect(bHas).toBe(false);
    releaseA();
    const releaseB = await waiting;
    expect(bHas).toBe(true);
    releaseB();
    a.close();
    b.close();
  });

  test("a history one store has read shows the turns the other committed since", () => {
    using dir = tmpdir();
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    const commit = (s: Store, text: string) =>
      s.conversations.commitTurn({
        userId: "u",
        sessionId: "s",
        agent: "x",
        messages: [
          { role: "user", content: text },
          { role: "assistant", content: `re ${text}` },
        ],
        at: new Date(),
      });
    commit(a, "one");
    expect(a.conversations.history("u", "s")).toHaveLength(2); // cached now
    commit(b, "two");
    expect(a.conversations.history("u", "s").map((m) => m.content)).toEqual([
      "one",
      "re one",
      "two",
      "re two",
    ]);
    commit(a, "three");
    expect(b.conversations.history("u", "s")).toHaveLength(6);
    expect(a.conversations.history("u", "s")).toEqual(b.conversations.history("u", "s"));
    a.close();
    b.close();
  });

  test("a holder whose process is gone is taken over; one alive, its lease run out or not, is not at once", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const db = new Database(join(dir.path, DB_FILE));
    db.run("INSERT INTO session_leases VALUES ('u', 'dead', 'x', 2147483000, ?)", [Date.now() + 60_000]);
    db.run("INSERT INTO session_leases VALUES ('u', 'old', 'y', ?, ?)", [process.pid, Date.now() - 1]);
    db.run("INSERT INTO session_leases VALUES ('u', 'live', 'z', ?, ?)", [process.pid, Date.now() + 60_000]);
    const leases = new SessionLeases(db);
    expect(leases.tryTake("u", "dead")).toBe(true);
    // Its renewals may have been refused by another process's lock: taken only after a grace
    // of polls (lease-grace.test.ts), which one try does not serve.
    expect(leases.tryTake("u", "old")).toBe(false);
    expect(leases.tryTake("u", "live")).toBe(false);
    db.close();
    store.close();
  });

  test("a waiter that is cancelled leaves the line", async () => {
    using dir = tmpdir();
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    const release = await lease(a, "s", never);
    const ac = new AbortController();
    const waiting = lease(b, "s", ac.signal);
    setTimeout(() => ac.abort(new Error("cancelled")), 60);
    await expect(waiting).rejects.toThrow("cancelled");
    release();
    expect(b.leases.tryTake("u", "s")).toBe(true);
    a.close();
    b.close();
  });

  test("a write locked out past its wait fails with an error naming the file, without blocking the loop", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { busyWaitMs: 400 });
    const other = new Database(join(dir.path, DB_FILE));
    other.run("BEGIN IMMEDIATE");
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    const t0 = Date.now();
    await expect(
      store.write(() => store.conversations.ensureSession("u", "s", "a", "hi", new Date())),
    ).rejects.toMatchObject({
      code: "internal_error",
      message: expect.stringContaining(join(dir.path, DB_FILE)),
    });
    clearInterval(timer);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
    expect(ticks).toBeGreaterThan(5); // the loop ran while the write waited
    // Once the lock goes, the same write succeeds.
    setTimeout(() => other.run("COMMIT"), 100);
    await store.write(() => store.conversations.ensureSession("u", "s", "a", "hi", new Date()));
    expect(store.conversations.session("u", "s")).toBeDefined();
    other.close();
    store.close();
  });
});
