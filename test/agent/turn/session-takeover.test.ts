import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import { INPUT_APART_CHARS } from "../../../src/store/checkpoint.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// One turn at a time per session across processes is a lease row (store/session-lease.ts). A
// core frozen past its TTL (a debugger, SIGSTOP, a paused VM) has its session taken over by
// another; every write of its turn, on waking, finds the lease gone and writes nothing.

const never = () => new AbortController().signal;
const LONG = `LONG-A ${"a".repeat(INPUT_APART_CHARS)}`;

const IMAGE = { format: "png", mime: "image/png", width: 1, height: 1, data: new Uint8Array(64).fill(7) };

/** A turn's lease and first writes; with `images`, those staged by the caller (`firstWrite`). */
async function turn(store: Store, input: string, resume = false, images?: (typeof IMAGE)[]) {
  const leased = await store.lease("u", "s", never(), () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId: "s" },
      {
        traceId: `t-${input.slice(0, 6)}`,
        input,
        agent: "a",
        resume,
        ...(images ? { images: images as never } : {}),
      },
      [],
      () => new Date(1_000),
    ),
  );
  // As run-turn.ts goes on: a long input's first checkpoint is written there.
  if (!images) await leased.value.firstWrite();
  return leased;
}

/** Core A's turn, then core B (which sees A's process as gone) taking the session over with its own. */
async function takenOver(
  dir: string,
  inputA: string,
  inputB: string,
  options: { prior?: boolean; images?: boolean } = {},
) {
  const a = Store.open(dir);
  const b = Store.open(dir, { leases: { alive: () => false } });
  // An interrupted turn before A's: the checkpoint A's put-back would write again.
  if (options.prior) (await turn(a, "an interrupted question")).release();
  const turnA = await turn(a, inputA, false, options.images ? [IMAGE] : undefined);
  const turnB = await turn(b, inputB);
  const checkpointB = () => {
    const found = b.conversations.checkpoint("u", "s");
    return { body: found, input: b.conversations.checkpointInput("u", "s") };
  };
  const before = checkpointB();
  return { a, b, turnA, turnB, before, checkpointB };
}

const takenOverError = {
  code: "invalid_request",
  message: expect.stringContaining("taken over by another process"),
  data: { field: "session_id" },
};

describe("a turn whose session another core took over", () => {
  test("its checkpoint save is refused: the other turn's checkpoint stays whole, not paired with another input", async () => {
    using dir = tmpdir("local-ai-takeover-");
    const { a, b, turnA, turnB, before, checkpointB } = await takenOver(
      dir.path,
      LONG,
      `LONG-B ${"b".repeat(INPUT_APART_CHARS)}`,
    );
    try {
      turnA.value.state.turn.push({ role: "assistant", content: "A's step" });
      turnA.value.state.step = 1;
      await expect(turnA.value.save()).rejects.toMatchObject(takenOverError);
      expect(checkpointB()).toEqual(before);
      // B's turn resumes as B left it.
      turnB.release();
      const resumed = await turn(b, "", true);
      expect(resumed.value.state.user_input.startsWith("LONG-B")).toBe(true);
      expect(resumed.value.state.turn).toHaveLength(1);
      resumed.release();
    } finally {
      turnA.release();
      a.close();
      b.close();
    }
  });

  test("its commit is refused, on the loop and on the store's thread: nothing lands in the other's turn", async () => {
    for (const input of ["a short question", LONG]) {
      using dir = tmpdir("local-ai-takeover-");
      const { a, b, turnA, turnB, before, checkpointB } = await takenOver(dir.path, input, "B's question");
      try {
        turnA.value.state.turn.push({ role: "assistant", content: "A's answer" });
        // Awaited, not `expect(…).rejects`: bun's matcher spins without the store's (unref'd) thread answering.
        const refused = await turnA.value.commit(`${input}\nA's answer`).catch((err: unknown) => err);
        expect(refused).toMatchObject(takenOverError);
        expect(b.get("u", "s", 10).messages).toEqual([]);
        expect(checkpointB()).toEqual(before);
        // B's own commit goes on.
        turnB.value.state.turn.push({ role: "assistant", content: "B's answer" });
        await turnB.value.commit(undefined);
        expect(b.get("u", "s", 10).messages.map((m) => m.content)).toEqual(["B's question", "B's answer"]);
      } finally {
        turnA.release();
        turnB.release();
        await a.stop();
        await b.stop();
      }
    }
  });

  test("its put-back is refused: the other turn's checkpoint is not cleared nor replaced", async () => {
    for (const prior of [false, true]) {
      using dir = tmpdir("local-ai-takeover-");
      const { a, turnA, turnB, before, checkpointB, b } = await takenOver(
        dir.path,
        "A's question",
        "B's question",
        {
          prior,
        },
      );
      try {
        expect(JSON.parse(before.body as string).user_input).toBe("B's question");
        await expect(turnA.value.putBack()).rejects.toMatchObject(takenOverError);
        expect(checkpointB()).toEqual(before);
      } finally {
        turnA.release();
        turnB.release();
        a.close();
        b.close();
      }
    }
  });

  test("its images' staging is refused: none of them is kept, the other turn's checkpoint stays", async () => {
    using dir = tmpdir("local-ai-takeover-");
    const { a, turnA, turnB, before, checkpointB, b } = await takenOver(
      dir.path,
      "A's photo",
      "B's question",
      {
        images: true,
      },
    );
    try {
      await expect(turnA.value.firstWrite()).rejects.toMatchObject(takenOverError);
      expect(checkpointB()).toEqual(before);
      expect(b.conversations.attachments.refsBySeq("u", "s").size).toBe(0);
      using db = readDb(join(dir.path, DB_FILE));
      expect(db.query("SELECT COUNT(*) AS n FROM attachments").get()).toEqual({ n: 0 });
    } finally {
      turnA.release();
      turnB.release();
      await a.stop();
      await b.stop();
    }
  });

  test("its new session's photo refused after the other turn left nothing: no row left, its title none", async () => {
    // The row for the photos is made in the first part's write: refused with it, not left empty
    // under a title made of this turn's words, when the core that took over kept nothing.
    using dir = tmpdir("local-ai-takeover-");
    const { a, turnA, turnB, b } = await takenOver(dir.path, "A's secret photo", "B's question", {
      images: true,
    });
    try {
      await turnB.value.putBack();
      turnB.release();
      await expect(turnA.value.firstWrite()).rejects.toMatchObject(takenOverError);
      using db = readDb(join(dir.path, DB_FILE));
      expect(db.query("SELECT title FROM sessions").all()).toEqual([]);
    } finally {
      turnA.release();
      await a.stop();
      await b.stop();
    }
  });

  test("taken over and finished (its lease released): still refused", async () => {
    using dir = tmpdir("local-ai-takeover-");
    const { a, turnA, turnB, b } = await takenOver(dir.path, "A's question", "B's question");
    try {
      turnB.value.state.turn.push({ role: "assistant", content: "B's answer" });
      await turnB.value.commit(undefined);
      turnB.release();
      turnA.value.state.turn.push({ role: "assistant", content: "A's answer" });
      await expect(turnA.value.commit(undefined)).rejects.toMatchObject(takenOverError);
      expect(b.get("u", "s", 10).messages.map((m) => m.content)).toEqual(["B's question", "B's answer"]);
    } finally {
      turnA.release();
      a.close();
      b.close();
    }
  });

  test("its session erased (which removes the lease too): the erase's own refusal, session_deleted", async () => {
    using dir = tmpdir("local-ai-takeover-");
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    const turnA = await turn(a, "A's question");
    try {
      await b.deleteSession("u", "s");
      await expect(turnA.value.save()).rejects.toMatchObject({
        code: "cancelled",
        data: { reason: "session_deleted" },
      });
    } finally {
      turnA.release();
      await a.stop();
      await b.stop();
    }
  });

  test("its lease run out but nobody took it: its writes go on", async () => {
    using dir = tmpdir("local-ai-takeover-");
    const a = Store.open(dir.path, { leases: { now: () => 0 } });
    const turnA = await turn(a, "A's question");
    try {
      // Expired (written at 0 + TTL) as another core's clock sees it: still A's row.
      turnA.value.state.turn.push({ role: "assistant", content: "A's answer" });
      await turnA.value.save();
      await turnA.value.commit(undefined);
      expect(a.get("u", "s", 10).messages.map((m) => m.content)).toEqual(["A's question", "A's answer"]);
    } finally {
      turnA.release();
      a.close();
    }
  });
});
