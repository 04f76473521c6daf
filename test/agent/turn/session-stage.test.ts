import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { Conversations } from "../../../src/store/conversations.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A turn's lease, its session's reading and its first checkpoint (before run_start: docs/agent.md,
// "L2 checkpoints") are one write (docs/performance.md, "The session in one write").

function begin(store: Store, sessionId: string): () => TurnSession {
  return () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t1", input: "hello there", agent: "a", resume: false },
      [],
      () => new Date(1_000),
    );
}

describe("a turn's first write", () => {
  test("a text turn: the lease, the session's row and its checkpoint in one transaction", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    const transactions = spyOn(Database.prototype, "transaction");
    try {
      const { release, value: session } = await store.lease(
        "u",
        "s1",
        AbortSignal.timeout(5000),
        begin(store, "s1"),
      );
      expect(transactions).toHaveBeenCalledTimes(1);
      expect(session.state.user_input).toBe("hello there");
      expect(store.conversations.session("u", "s1")).toBeDefined();
      const checkpoint = JSON.parse(store.conversations.checkpoint("u", "s1") as string);
      expect(checkpoint).toMatchObject({ version: 1, user_input: "hello there" });
      // Held until released: another core's store cannot take it.
      const other = Store.open(dir.path);
      try {
        expect(other.leases.tryTake("u", "s1")).toBe(false);
        release();
        expect(other.leases.tryTake("u", "s1")).toBe(true);
      } finally {
        other.close();
      }
    } finally {
      transactions.mockRestore();
      store.close();
    }
  });

  test("a session's next turn does not try its row again: the reading found it", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    const ensured = spyOn(Conversations.prototype, "ensureSession");
    try {
      const first = await store.lease("u", "s5", AbortSignal.timeout(5000), begin(store, "s5"));
      expect(ensured).toHaveBeenCalledTimes(1);
      first.value.state.turn.push({ role: "assistant", content: "hi" });
      await first.value.commit(undefined);
      first.release();
      ensured.mockClear();
      // A message of it is there, so its row is: the lease's write makes no insert.
      const next = await store.lease("u", "s5", AbortSignal.timeout(5000), begin(store, "s5"));
      expect(ensured).not.toHaveBeenCalled();
      expect(JSON.parse(store.conversations.checkpoint("u", "s5") as string)).toMatchObject({
        trace_id: "t1",
        user_input: "hello there",
      });
      expect(store.conversations.session("u", "s5")?.title).toBe("hello there");
      next.release();
      // Only its checkpoint there (a turn interrupted before it answered): the row is known too.
      const interrupted = await store.lease("u", "s6", AbortSignal.timeout(5000), begin(store, "s6"));
      interrupted.release();
      ensured.mockClear();
      const resumed = await store.lease("u", "s6", AbortSignal.timeout(5000), begin(store, "s6"));
      expect(ensured).not.toHaveBeenCalled();
      expect(store.conversations.checkpoint("u", "s6")).toBeDefined();
      resumed.release();
    } finally {
      ensured.mockRestore();
      store.close();
    }
  });

  test("held by another core: nothing of the turn is read or written", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    const other = Store.open(dir.path);
    try {
      expect(other.leases.tryTake("u", "s2")).toBe(true);
      let ran = false;
      const leased = await store.tryLease("u", "s2", AbortSignal.timeout(5000), () => {
        ran = true;
        return begin(store, "s2")();
      });
      expect(leased).toBeUndefined();
      expect(ran).toBe(false);
      expect(store.conversations.session("u", "s2")).toBeUndefined();
    } finally {
      other.close();
      store.close();
    }
  });

  test("a rewrite's lease waits out a database another core is writing, then runs", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    // Another core's write in progress: the database's write lock held for 150 ms.
    const other = new Database(join(dir.path, DB_FILE));
    try {
      other.run("BEGIN IMMEDIATE");
      const released = Bun.sleep(150).then(() => other.run("COMMIT"));
      const leased = await store.tryLease("u", "s4", AbortSignal.timeout(5000), begin(store, "s4"));
      await released;
      expect(leased?.value.state.user_input).toBe("hello there");
      leased?.release();
    } finally {
      other.close();
      store.close();
    }
  });

  test("what fails after the checkpoint undoes it, the session's row and the lease", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    try {
      const failing = () => {
        begin(store, "s3")();
        throw new Error("refused after the stage");
      };
      await expect(store.lease("u", "s3", AbortSignal.timeout(5000), failing)).rejects.toThrow(
        "refused after the stage",
      );
      expect(store.conversations.session("u", "s3")).toBeUndefined();
      expect(store.conversations.checkpoint("u", "s3")).toBeUndefined();
      // Another core's store finds the session free (this one would take back its own row too).
      const other = Store.open(dir.path);
      try {
        expect(other.leases.tryTake("u", "s3")).toBe(true);
      } finally {
        other.close();
      }
    } finally {
      store.close();
    }
  });

  test("a turn bringing images: its checkpoint only once they are all staged, never one without them", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    const image = { format: "png", mime: "image/png", width: 1, height: 1, data: new Uint8Array(3_000_000) };
    const withImages = (sessionId: string) => () =>
      TurnSession.begin(
        store,
        { userId: "u", sessionId },
        { traceId: "t2", input: "look at this", agent: "a", resume: false, images: [image as never] },
        [],
        () => new Date(2_000),
      );
    // The store's writes during staging: the second one never ends (the core dies there).
    const realWrite = store.write.bind(store);
    let writes = 0;
    const write = spyOn(store, "write").mockImplementation(((work: () => unknown) =>
      ++writes === 2 ? new Promise(() => {}) : realWrite(work)) as typeof store.write);
    try {
      // A session with an interrupted turn: its checkpoint stays as it was.
      const first = await store.lease("u", "s7", AbortSignal.timeout(5000), begin(store, "s7"));
      first.release();
      const before = store.conversations.checkpoint("u", "s7");
      const leased = await store.lease("u", "s7", AbortSignal.timeout(5000), withImages("s7"));
      void leased.value.firstWrite();
      await Bun.sleep(50);
      expect(writes).toBe(2);
      expect(store.conversations.checkpoint("u", "s7")).toBe(before as string);
      // A new session: no checkpoint at all until the images are in.
      writes = 0;
      const fresh = await store.lease("u", "s8", AbortSignal.timeout(5000), withImages("s8"));
      void fresh.value.firstWrite();
      await Bun.sleep(50);
      expect(store.conversations.checkpoint("u", "s8")).toBeUndefined();
      // Once staging ends, the checkpoint names the images.
      write.mockRestore();
      const done = await store.lease("u", "s9", AbortSignal.timeout(5000), withImages("s9"));
      await done.value.firstWrite();
      const named = JSON.parse(store.conversations.checkpoint("u", "s9") as string);
      expect(named.turn[0].attachments).toHaveLength(1);
      done.release();
    } finally {
      write.mockRestore();
      store.close();
    }
  });
});
