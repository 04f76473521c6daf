import { describe, expect, test } from "bun:test";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { cancelledError } from "../../../src/protocol/errors.ts";
import { INPUT_APART_CHARS } from "../../../src/store/checkpoint.ts";
import { Store } from "../../../src/store/store.ts";
import { holdCopies } from "../../fixtures/hold-erase.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A long input's first checkpoint is written off the loop, in line behind this core's erases
// (Store.writeOffLoop). A cancel while it waits there ends the turn at once: before run_start,
// with nothing of the turn written.

const LONG = "x".repeat(INPUT_APART_CHARS + 1);

function begin(store: Store, sessionId: string, input = LONG): () => TurnSession {
  return () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t1", input, agent: "a", resume: false },
      [],
      () => new Date(1_000),
    );
}

describe("a long input's first checkpoint, in line behind an erase", () => {
  test("a cancel while it waits ends it at once and leaves nothing: no row, no checkpoint, the erase done after", async () => {
    using dir = tmpdir("local-ai-first-cancel-");
    const store = Store.open(dir.path);
    await store.lease("u", "other", AbortSignal.timeout(5000), begin(store, "other", "short")).then((l) => {
      l.release();
    });
    using held = holdCopies();
    try {
      const turn = new AbortController();
      const leased = await store.lease("u", "s1", turn.signal, begin(store, "s1"));
      const deleting = store.deleteSession("u", "other");
      const first = leased.value.firstWrite(turn.signal);
      const settled: string[] = [];
      // The erase in front is let go only once the turn has settled: a turn that waits for it never does.
      const outcome = first.then(
        () => "written",
        (err: unknown) => String((err as { code?: string }).code),
      );
      void outcome.then((o) => {
        settled.push(o);
        held.open();
      });
      turn.abort(cancelledError("cancelled by the host"));
      expect(await outcome).toBe("cancelled");
      expect(settled).toEqual(["cancelled"]);
      leased.release();
      expect((await deleting).deleted).toBe(true);
      await store.afterErases();
      // Nothing of the cancelled turn: the checkpoint was never written, and no row was left for it.
      expect(store.conversations.checkpoint("u", "s1")).toBeUndefined();
      expect(store.conversations.session("u", "s1")).toBeUndefined();
    } finally {
      held.open();
      await store.stop();
    }
  }, 10_000);

  test("in a session already stored, a cancel while it waits ends it at once too, the session as it was", async () => {
    using dir = tmpdir("local-ai-first-cancel-");
    const store = Store.open(dir.path);
    // A turn of s1 left its checkpoint (interrupted): s1 has its row, and that checkpoint to keep.
    await store.lease("u", "s1", AbortSignal.timeout(5000), begin(store, "s1", "short")).then((l) => {
      l.release();
    });
    await store.lease("u", "other", AbortSignal.timeout(5000), begin(store, "other", "short")).then((l) => {
      l.release();
    });
    const before = store.conversations.checkpoint("u", "s1");
    using held = holdCopies();
    try {
      const turn = new AbortController();
      const leased = await store.lease("u", "s1", turn.signal, begin(store, "s1"));
      const deleting = store.deleteSession("u", "other");
      const first = leased.value.firstWrite(turn.signal);
      const settled: string[] = [];
      // Putting the old checkpoint back (nothing of this turn was written) waited out the erase.
      const outcome = first.then(
        () => "written",
        (err: unknown) => String((err as { code?: string }).code),
      );
      void outcome.then((o) => {
        settled.push(o);
        held.open();
      });
      turn.abort(cancelledError("cancelled by the host"));
      expect(await outcome).toBe("cancelled");
      expect(settled).toEqual(["cancelled"]);
      leased.release();
      expect((await deleting).deleted).toBe(true);
      await store.afterErases();
      expect(store.conversations.checkpoint("u", "s1")).toBe(before);
      expect(store.conversations.session("u", "s1")).toBeDefined();
    } finally {
      held.open();
      await store.stop();
    }
  }, 10_000);

  test("one not cancelled is written once the erase ends, its session's row with it", async () => {
    using dir = tmpdir("local-ai-first-cancel-");
    const store = Store.open(dir.path);
    using held = holdCopies();
    try {
      const leased = await store.lease("u", "s1", AbortSignal.timeout(5000), begin(store, "s1"));
      const deleting = store.deleteSession("u", "gone");
      const first = leased.value.firstWrite(AbortSignal.timeout(5000));
      held.open();
      await deleting;
      await first;
      leased.release();
      expect(store.conversations.checkpointInput("u", "s1")).toBe(LONG);
      expect(store.list("u", 10).sessions.map((s) => s.session_id)).toEqual(["s1"]);
    } finally {
      await store.stop();
    }
  }, 10_000);
});

// A turn's lease waits first for this core's erases (a large delete, the 0.1 import: minutes);
// that wait was not cancellable: a cancelled chat answered only once they had ended.
/**
 * `work`'s outcome (`done`, or its error's code) once `turn` is cancelled; the held erase in front
 * is let go only once it has settled, so a wait that needs the erase to end never settles.
 */
function cancelledBefore(held: { open: () => void }, turn: AbortController, work: Promise<unknown>) {
  const outcome = work.then(
    () => "done",
    (err: unknown) => String((err as { code?: string }).code),
  );
  void outcome.then(() => held.open());
  turn.abort(cancelledError("cancelled by the host"));
  return outcome;
}

/** `store` once a short turn has begun session `sessionId` (its row and checkpoint written). */
async function withSession(store: Store, sessionId: string): Promise<Store> {
  const leased = await store.lease(
    "u",
    sessionId,
    AbortSignal.timeout(5000),
    begin(store, sessionId, "short"),
  );
  leased.release();
  return store;
}

describe("a turn's lease, in line behind an erase", () => {
  for (const kind of ["lease", "tryLease"] as const)
    test(`${kind}: a cancel while it waits ends it at once, nothing written`, async () => {
      using dir = tmpdir("local-ai-lease-cancel-");
      const store = await withSession(Store.open(dir.path), "other");
      using held = holdCopies();
      try {
        const turn = new AbortController();
        const deleting = store.deleteSession("u", "other");
        const leasing = store[kind]("u", "s1", turn.signal, begin(store, "s1", "short"));
        expect(await cancelledBefore(held, turn, leasing)).toBe("cancelled");
        expect((await deleting).deleted).toBe(true);
        await store.afterErases();
        expect(store.conversations.session("u", "s1")).toBeUndefined();
      } finally {
        held.open();
        await store.stop();
      }
    }, 10_000);
});

// A chat's photos are staged before its first checkpoint, each part a write that waited for this
// core's erases without the turn's signal: a cancel then was answered only once they had ended.
describe("a turn's photos, staged in line behind an erase", () => {
  const image = { format: "png", mime: "image/png", width: 1, height: 1, data: new Uint8Array(1000) };
  const withPhoto = (store: Store, sessionId: string) => () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t3", input: "look", agent: "a", resume: false, images: [image as never] },
      [],
      () => new Date(2_000),
    );

  /** A photo turn of `sessionId` cancelled while its first part waits behind a delete of "other", all settled. */
  async function photoCancelled(store: Store, held: { open: () => void }, sessionId: string): Promise<void> {
    const turn = new AbortController();
    const leased = await store.lease("u", sessionId, turn.signal, withPhoto(store, sessionId));
    const deleting = store.deleteSession("u", "other");
    expect(await cancelledBefore(held, turn, leased.value.firstWrite(turn.signal))).toBe("cancelled");
    leased.release();
    expect((await deleting).deleted).toBe(true);
    await store.afterErases();
  }

  test("a cancel while the first part waits ends the turn at once, the session as it was", async () => {
    using dir = tmpdir("local-ai-photo-cancel-");
    // s1 has its row and an interrupted turn's checkpoint, which the cancelled turn leaves as it was.
    const store = await withSession(await withSession(Store.open(dir.path), "s1"), "other");
    const before = store.conversations.checkpoint("u", "s1");
    using held = holdCopies();
    try {
      await photoCancelled(store, held, "s1");
      expect(store.conversations.checkpoint("u", "s1")).toBe(before as string);
    } finally {
      held.open();
      await store.stop();
    }
  }, 10_000);

  test("in a new session, a cancel while the first part waits ends it at once and leaves no row", async () => {
    // The session's row was made in the lease's write, for the photos: only a put-back, in line
    // behind the same erase, removed it. It is now made in the first part's write.
    using dir = tmpdir("local-ai-photo-cancel-");
    const store = await withSession(Store.open(dir.path), "other");
    using held = holdCopies();
    try {
      await photoCancelled(store, held, "fresh");
      expect(store.conversations.session("u", "fresh")).toBeUndefined();
    } finally {
      held.open();
      await store.stop();
    }
  }, 10_000);

  test("in a new session not cancelled, the photo is staged with the session's row", async () => {
    using dir = tmpdir("local-ai-photo-cancel-");
    const store = Store.open(dir.path);
    try {
      const leased = await store.lease("u", "fresh", AbortSignal.timeout(5000), withPhoto(store, "fresh"));
      await leased.value.firstWrite(AbortSignal.timeout(5000));
      leased.release();
      expect(store.conversations.session("u", "fresh")?.title).toBe("look");
      expect((leased.value.state.turn[0] as { attachments?: unknown[] }).attachments?.length).toBe(1);
    } finally {
      await store.stop();
    }
  }, 10_000);
});
