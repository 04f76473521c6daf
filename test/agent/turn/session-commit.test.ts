import { describe, expect, test } from "bun:test";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { Store } from "../../../src/store/store.ts";
import { threadErases } from "../../fixtures/interleave.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A turn's commit has FTS5 index its messages and its memory entry: ~15 ms a MiB, and a chat's
// input may be as long as a line (8 MiB), which held the main loop (ping, cancel) for a quarter
// of a second and more. A long turn's commit runs on the store's thread; a short one stays here.

async function committed(store: Store, sessionId: string, input: string): Promise<void> {
  const { release, value: session } = await store.lease("u", sessionId, AbortSignal.timeout(5000), () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t1", input, agent: "a", resume: false },
      [],
      () => new Date(1_000),
    ),
  );
  try {
    session.state.turn.push({ role: "assistant", content: "noted" });
    await session.commit(`${input}\nnoted`);
  } finally {
    release();
  }
}

describe("a turn's commit", () => {
  test("a long input's turn is committed on the store's thread, whole; a short one on the loop", async () => {
    using dir = tmpdir("local-ai-commit-");
    const store = Store.open(dir.path);
    try {
      using asked = threadErases();
      await committed(store, "short", "a short question");
      expect(asked.seen).toEqual([]);
      const long = `PANGOLIN ${"word ".repeat(200_000)}`;
      await committed(store, "long", long);
      expect(asked.seen.map((e) => e.kind)).toEqual(["commit"]);
      const page = store.get("u", "long", 10);
      expect(page.messages.map((m) => m.content)).toEqual([long, "noted"]);
      expect(store.conversations.checkpoint("u", "long")).toBeUndefined();
      expect((await store.search("u", "PANGOLIN", 5)).map((h) => h.session_id)).toEqual(["long"]);
    } finally {
      await store.stop();
    }
  });
});
