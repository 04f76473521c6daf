import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { eraseInSteps, eraseSession } from "../../src/store/erase.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** The text of every history the core holds in memory (store/session-histories.ts). */
function cachedText(store: Store): string {
  const { cache } = store.conversations.histories as unknown as {
    cache: Map<string, { messages: ChatMessage[] }>;
  };
  return JSON.stringify([...cache.values()].map((c) => c.messages));
}

// An edit erases the tail it replaces as a delete erases a session; the store's thread commits it,
// so the history this core cached before it held that tail (never sent again: its stamp moved)
// until the session was next read, which may be never.
test("an edit committed on the store's thread leaves none of the tail it erased in the cached histories", async () => {
  using dir = tmpdir("local-ai-history-erase-");
  const store = Store.open(dir.path);
  try {
    const at = new Date();
    store.conversations.commitTurn({
      userId: "u",
      sessionId: "s",
      agent: "a",
      at,
      messages: [
        { role: "user", content: "q1" },
        { role: "assistant", content: "a1" },
        { role: "user", content: "my card is 4111-1111" },
        { role: "assistant", content: "noted" },
      ],
    });
    expect(store.conversations.history("u", "s")).toHaveLength(4);
    expect(cachedText(store)).toContain("4111-1111");
    const turn = {
      userId: "u",
      sessionId: "s",
      agent: "a",
      at,
      replaceFromSeq: 2,
      messages: [
        { role: "user", content: "never mind" },
        { role: "assistant", content: "ok" },
      ] as ChatMessage[],
    };
    await store.writeOffLoop({ kind: "commit", turn });
    expect(cachedText(store)).not.toContain("4111-1111");
    expect(store.conversations.history("u", "s").map((m) => m.content)).toEqual([
      "q1",
      "a1",
      "never mind",
      "ok",
    ]);
  } finally {
    await store.stop();
  }
});

// Another core on the same folder deletes a session this one has cached: the erase's number moves
// its stamp, so it is never sent again, but its messages stayed in this core's memory for as long
// as 15 other sessions did not push them out.
test("a session another core deleted leaves this core's cached histories at its next read", () => {
  using dir = tmpdir("local-ai-history-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    const commit = (sessionId: string, content: string) =>
      store.conversations.commitTurn({
        userId: "u",
        sessionId,
        agent: "a",
        at: new Date(),
        messages: [
          { role: "user", content },
          { role: "assistant", content: "ok" },
        ],
      });
    commit("s", "my card is 4111-1111");
    commit("t", "hello");
    expect(store.conversations.history("u", "s")).toHaveLength(2);
    expect(cachedText(store)).toContain("4111-1111");
    other.run("PRAGMA foreign_keys = ON");
    expect(eraseSession(other, "u", "s", Date.now())).toBe(true);
    expect(store.conversations.history("u", "t")).toHaveLength(2);
    expect(cachedText(store)).not.toContain("4111-1111");
  } finally {
    other.close();
    store.close();
  }
});

/**
 * `other` (another core's connection) erasing the session in steps as on a full disk
 * (store/erase.ts eraseInSteps), `between` called after each step's commit with the session's
 * messages left; it may throw, which ends the erase there as a failing step does.
 */
function eraseInStepsWith(other: Database, between: (left: number) => void): void {
  const left = () =>
    (other.query("SELECT COUNT(*) AS n FROM messages WHERE session_id = 's'").get() as { n: number }).n;
  const db = new Proxy(other, {
    get(target, prop) {
      if (prop === "transaction")
        return (fn: () => unknown) => {
          const tx = target.transaction(fn);
          return {
            immediate: () => {
              const result = tx.immediate();
              between(left());
              return result;
            },
          };
        };
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  eraseInSteps(db, "u", "s", Date.now());
}

function commitMany(store: Store, sessionId: string, turns: number): void {
  const messages: ChatMessage[] = [];
  for (let i = 0; i < turns; i++)
    messages.push({ role: "user", content: `secret-${i}` }, { role: "assistant", content: "ok" });
  store.conversations.commitTurn({ userId: "u", sessionId, agent: "a", at: new Date(), messages });
}

/** This core's store and another core's connection on its folder, session s of 100 messages. */
function withOtherCore(run: (store: Store, other: Database) => void): void {
  using dir = tmpdir("local-ai-history-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    other.run("PRAGMA foreign_keys = ON");
    commitMany(store, "s", 50);
    run(store, other);
  } finally {
    other.close();
    store.close();
  }
}

// A full disk's erase records the erase first, then takes the messages a few at a time: a history
// read between two steps was cached under the erase's new number and the session's stamp, which
// the later steps did not move. An erase failing midway left the session, and that cache, which
// held messages erased after it was read, was sent to the model as the session's history.
test("a history read between a stepped erase's steps is not served once later steps erased more", () => {
  withOtherCore((store, other) => {
    // Read after the first step that took messages, fail after the next: counted, not matched
    // on a number of messages left, which holds only for one step size.
    const reads: number[] = [];
    let failedAt: number | undefined;
    expect(() =>
      eraseInStepsWith(other, (left) => {
        if (left === 100) return;
        if (reads.length === 0) {
          expect(store.conversations.history("u", "s")).toHaveLength(left);
          reads.push(left);
          return;
        }
        failedAt = left;
        throw new Error("disk I/O error");
      }),
    ).toThrow("disk I/O error");
    expect(reads).toHaveLength(1);
    expect(failedAt).toBeGreaterThan(0);
    expect(failedAt).toBeLessThan(reads[0] as number);
    expect(store.conversations.session("u", "s")).toBeDefined();
    expect(store.conversations.history("u", "s")).toHaveLength(failedAt as number);
  });
});

// The same read, the erase then finished: the history cached midway stayed in this core's memory
// (its number was the newest, so no read dropped it) until 15 other sessions pushed it out.
test("a history read between a finished stepped erase's steps leaves the cache at the next read", () => {
  withOtherCore((store, other) => {
    commitMany(store, "t", 1);
    const reads: number[] = [];
    eraseInStepsWith(other, (left) => {
      if (left === 100 || left === 0 || reads.length > 0) return;
      expect(store.conversations.history("u", "s")).toHaveLength(left);
      reads.push(left);
    });
    // The read happened midway, with a message the erase took after it still there.
    expect(reads).toHaveLength(1);
    expect(reads[0]).toBeGreaterThan(20);
    expect(store.conversations.session("u", "s")).toBeUndefined();
    expect(store.conversations.history("u", "t")).toHaveLength(2);
    expect(cachedText(store)).not.toContain("secret-40");
  });
});

// Each step recorded a row of its own: an erase of 100,000 messages left ~3,000 rows, each step's
// prune scanning them all (its cost growing with the square of the erase, inside each step's write), and
// for a day the rows' count told anyone with the file how much the erased session held.
test("a stepped erase keeps one erasures row, its number moved at each step", () => {
  withOtherCore((store, other) => {
    const marks: number[] = [];
    eraseInStepsWith(other, () => marks.push(store.conversations.erasureMark()));
    expect(new Set(marks).size).toBe(marks.length);
    expect(other.query("SELECT COUNT(*) AS n FROM erasures").get()).toEqual({ n: 1 });
  });
});
