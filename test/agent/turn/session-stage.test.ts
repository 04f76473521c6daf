import { describe, expect, test } from "bun:test";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A turn's first checkpoint, before run_start (docs/agent.md, "L2 checkpoints"): without new
// images it is one write with the session's row (docs/performance.md "The first token, again").

function staged(store: Store, sessionId: string): TurnSession {
  return TurnSession.open(
    store,
    { userId: "u", sessionId },
    { traceId: "t1", input: "hello there", agent: "a", resume: false },
    [],
    () => new Date(1_000),
  );
}

/** Counts the store's write transactions. */
function countWrites(store: Store): () => number {
  let writes = 0;
  const write = store.write.bind(store);
  store.write = <T>(work: () => T) => {
    writes += 1;
    return write(work);
  };
  return () => writes;
}

describe("a turn's stage", () => {
  test("a text turn: the session's row and its checkpoint in one write", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    try {
      const writes = countWrites(store);
      const session = staged(store, "s1");
      await session.stage();
      expect(writes()).toBe(1);
      expect(store.conversations.session("u", "s1")).toBeDefined();
      const checkpoint = JSON.parse(store.conversations.checkpoint("u", "s1") as string);
      expect(checkpoint).toMatchObject({ version: 1, user_input: "hello there" });
    } finally {
      store.close();
    }
  });

  test("a session erased after the turn began: neither the row nor the checkpoint is written", async () => {
    using dir = tmpdir("local-ai-stage-");
    const store = Store.open(dir.path);
    try {
      // An earlier turn made the session, then it is erased while this one prepares.
      await staged(store, "s2").stage();
      const session = staged(store, "s2");
      await store.deleteSession("u", "s2");
      await expect(session.stage()).rejects.toMatchObject({ code: "cancelled" });
      expect(store.conversations.session("u", "s2")).toBeUndefined();
      expect(store.conversations.checkpoint("u", "s2")).toBeUndefined();
    } finally {
      store.close();
    }
  });
});
