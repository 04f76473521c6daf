import { describe, expect, test } from "bun:test";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import type { PreparedImage } from "../../../src/images/prepare.ts";
import { cancelledError } from "../../../src/protocol/errors.ts";
import { Store } from "../../../src/store/store.ts";
import { holdCopies } from "../../fixtures/hold-erase.ts";
import { png } from "../../fixtures/images.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A turn that sets aside an interrupted one with images settles their pages' rewrite before
// run_start, in line behind this core's erases (Store.settleOwed). A cancel while it waits there
// must end that wait at once, as the first checkpoint's own wait does
// (session-first-write-cancel.test.ts): else the chat hangs on another user's long delete.

function begin(store: Store, sessionId: string, input: string, images?: PreparedImage[]): () => TurnSession {
  return () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t1", input, agent: "a", resume: false, ...(images ? { images } : {}) },
      [],
      () => new Date(1_000),
    );
}

describe("a set-aside turn's images, settled behind an erase", () => {
  test("a cancel while the settle waits ends the first write at once", async () => {
    using dir = tmpdir("local-ai-set-aside-cancel-");
    const store = Store.open(dir.path);
    const photo: PreparedImage = { format: "png", mime: "image/png", width: 3, height: 3, data: png(3, 3) };
    // s1's turn staged a photo and was broken off: its checkpoint names it.
    const broken = await store.lease(
      "u",
      "s1",
      AbortSignal.timeout(5000),
      begin(store, "s1", "look", [photo]),
    );
    await broken.value.firstWrite(AbortSignal.timeout(5000));
    broken.release();
    await store.lease("u", "other", AbortSignal.timeout(5000), begin(store, "other", "short")).then((l) => {
      l.release();
    });
    using held = holdCopies();
    try {
      const turn = new AbortController();
      // A fresh turn of s1 (no resume) sets the broken-off one aside.
      const leased = await store.lease("u", "s1", turn.signal, begin(store, "s1", "never mind"));
      const deleting = store.deleteSession("u", "other");
      const first = leased.value.firstWrite(turn.signal);
      const settled: string[] = [];
      // The erase in front is let go only once the first write has settled: one that waits for it never does.
      const outcome = first.then(
        () => "written",
        (err: unknown) => String((err as { code?: string }).code),
      );
      void outcome.then((o) => {
        settled.push(o);
        held.open();
      });
      turn.abort(cancelledError("cancelled by the host"));
      // Cancelled there, before run_start: the turn's own checkpoint stays, as after any cancel.
      expect(await outcome).toBe("cancelled");
      expect(settled).toEqual(["cancelled"]);
      leased.release();
      expect((await deleting).deleted).toBe(true);
      await store.afterErases();
    } finally {
      held.open();
      await store.stop();
    }
  }, 10_000);
});
