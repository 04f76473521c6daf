import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { TurnSession, type TurnStart } from "../../../src/agent/turn/session.ts";
import type { Warning } from "../../../src/protocol/chat.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { StatementDatabase } from "../../../src/store/db/statements.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A turn saves its checkpoint at its start, after each model step and after each tool result. A
// chat's input may be a whole stdio line (8 MiB), and each save wrote it again, twice (the body's
// `user_input` and the turn's opening message): ~16 MiB a save, on the main loop. A long input is
// now written once, with the turn's first save; a crash after any save still resumes the turn.

const LONG = `OKAPI ${"x".repeat(1024 * 1024)}`;
const ERASED = `WOMBAT ${"y".repeat(1024 * 1024)}`;

async function begun(
  store: Store,
  sessionId: string,
  start: Partial<TurnStart> = {},
  warnings: Warning[] = [],
) {
  const leased = await store.lease("u", sessionId, AbortSignal.timeout(5000), () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId },
      { traceId: "t1", input: LONG, agent: "a", resume: false, ...start },
      warnings,
      () => new Date(1_000),
    ),
  );
  // As run-turn.ts goes on: the first checkpoint, where the lease's write did not write it.
  await leased.value.firstWrite();
  return leased;
}

/** The characters of text bound to SQLite's statements while `work` runs. */
async function boundChars(work: () => Promise<unknown>): Promise<number> {
  let chars = 0;
  let counting = true;
  const wrapped = new WeakSet<object>();
  // A statement's `run` is its own (bun:sqlite), and the store keeps them: each is wrapped as
  // the store asks for it, the wrap counting only while `work` runs.
  const original = StatementDatabase.prototype.query;
  function counted(this: StatementDatabase, sql: string) {
    const statement = original.call(this, sql);
    if (wrapped.has(statement)) return statement;
    wrapped.add(statement);
    const run = statement.run.bind(statement);
    statement.run = (...bound) => {
      if (counting) for (const a of bound) chars += typeof a === "string" ? a.length : 0;
      return run(...bound);
    };
    return statement;
  }
  const query = spyOn(StatementDatabase.prototype, "query").mockImplementation(
    counted as unknown as typeof original,
  );
  try {
    await work();
    return chars;
  } finally {
    counting = false;
    query.mockRestore();
  }
}

/** A turn with two tool steps so far, its checkpoint saved after each as a turn's is. */
async function twoToolSteps(session: TurnSession): Promise<number[]> {
  const written: number[] = [];
  for (const id of ["c1", "c2"]) {
    const call = { id, type: "function" as const, function: { name: "t__echo", arguments: "{}" } };
    session.state.turn.push({ role: "assistant", content: null, tool_calls: [call] });
    written.push(await boundChars(() => session.save()));
    session.state.turn.push({ role: "tool", tool_call_id: id, content: `result ${id}` });
    written.push(await boundChars(() => session.save()));
  }
  return written;
}

describe("a long input's checkpoints", () => {
  test("are written once per turn: the later saves write only what changed; a crash resumes it whole", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      let leased: Awaited<ReturnType<typeof begun>> | undefined;
      const first = await boundChars(async () => {
        leased = await begun(store, "s");
      });
      const session = leased?.value as TurnSession;
      // Written on the store's thread (below), none of it on the main loop's connection.
      expect(first).toBeLessThan(4096);
      expect(store.conversations.checkpointInput("u", "s")).toBe(LONG);
      for (const chars of await twoToolSteps(session)) expect(chars).toBeLessThan(4096);
      leased?.release();
      // The process dies here: the next one resumes from the last save.
      store.close();
      const again = Store.open(dir.path);
      try {
        const warnings: Warning[] = [];
        const resumed = await begun(again, "s", { traceId: "t2", input: "", resume: true }, warnings);
        expect(warnings).toEqual([]);
        const { state } = resumed.value;
        expect(state.user_input).toBe(LONG);
        expect(state.turn.map((m) => m.content)).toEqual([LONG, null, "result c1", null, "result c2"]);
        resumed.value.state.turn.push({ role: "assistant", content: "done" });
        await resumed.value.commit(undefined);
        resumed.release();
        expect(again.get("u", "s", 10).messages[0]?.content).toBe(LONG);
        expect(again.conversations.checkpoint("u", "s")).toBeUndefined();
        expect(again.conversations.checkpointInput("u", "s")).toBeUndefined();
      } finally {
        await again.stop();
      }
    } catch (err) {
      store.close();
      throw err;
    }
  });

  test("the first save writes it on the store's thread, under the lease's check: `ping` and `cancel` answer meanwhile", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      const key = { userId: "u", sessionId: "s" };
      const start = { traceId: "t1", input: LONG, agent: "a", resume: false };
      let session: TurnSession | undefined;
      let leased: { release: () => void } | undefined;
      const onLoop = await boundChars(async () => {
        leased = await store.lease("u", "s", AbortSignal.timeout(5000), () => {
          session = TurnSession.begin(store, key, start, [], () => new Date(1_000));
        });
        await session?.firstWrite();
      });
      expect(onLoop).toBeLessThan(4096);
      expect(store.conversations.checkpointInput("u", "s")).toBe(LONG);
      leased?.release();
      // Another core took the session over meanwhile: the thread's write is refused as the loop's are.
      const other = Store.open(dir.path, { chunkThread: false });
      try {
        const late = TurnSession.begin(store, key, { ...start, traceId: "t2" }, [], () => new Date(2_000));
        expect(other.leases.tryTake("u", "s")).toBe(true);
        const refused = (await late.firstWrite().catch((err: unknown) => err)) as { data?: unknown };
        expect(refused.data).toEqual({ field: "session_id" });
        expect(store.conversations.checkpoint("u", "s")).toContain('"trace_id":"t1"');
      } finally {
        other.close();
      }
    } finally {
      await store.stop();
    }
  });

  test("a full disk refuses the first save as it refused it in the lease's write: the file named, nothing kept", async () => {
    // Without a thread the off-loop write runs on this connection, which `max_page_count` binds
    // (the thread's own connection would not see it); its failure is named as the loop's are.
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path, { chunkThread: false });
    try {
      const db = (store as unknown as { db: Database }).db;
      const pages = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
      db.run(`PRAGMA max_page_count = ${pages}`);
      const key = { userId: "u", sessionId: "s" };
      const start = { traceId: "t1", input: LONG, agent: "a", resume: false };
      // The lease's write (the session's row) fits; the first save, with its megabyte, does not.
      const leased = await store.lease("u", "s", AbortSignal.timeout(5000), () =>
        TurnSession.begin(store, key, start, [], () => new Date(1_000)),
      );
      const refused = (await leased.value.firstWrite().catch((err: unknown) => err)) as { data?: unknown };
      leased.release();
      expect(refused.data).toMatchObject({
        path: join(dir.path, DB_FILE),
        problem: expect.stringMatching(/^SQLITE_FULL/),
      });
      db.run("PRAGMA max_page_count = 1073741823");
      expect(store.conversations.checkpoint("u", "s")).toBeUndefined();
      expect(store.conversations.checkpointInput("u", "s")).toBeUndefined();
    } finally {
      await store.stop();
    }
  });

  test("a checkpoint an earlier version wrote, the input in its body, still resumes", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      const body = {
        version: 1,
        trace_id: "t0",
        user_input: LONG,
        agent: "a",
        step: 1,
        parse_errors: 0,
        best_text: "",
        turn: [{ role: "user", content: LONG }],
        updated_at: new Date(0).toISOString(),
      };
      store.conversations.ensureSession("u", "old", "a", LONG, new Date(0));
      store.conversations.saveCheckpoint("u", "old", JSON.stringify(body), new Date(0));
      const warnings: Warning[] = [];
      const resumed = await begun(store, "old", { input: "", resume: true }, warnings);
      expect(warnings).toEqual([]);
      expect(resumed.value.state).toMatchObject({ user_input: LONG, step: 1, turn: [{ content: LONG }] });
      resumed.release();
    } finally {
      await store.stop();
    }
  });

  test("no copy of a long input outlives its checkpoint: a short turn after it, a session's erase", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      const long = await begun(store, "s");
      await twoToolSteps(long.value);
      long.release();
      // A new turn, not resuming: the interrupted one is set aside, its input with it.
      const short = await begun(store, "s", { input: "a short one" }, []);
      expect(store.conversations.checkpointInput("u", "s")).toBeUndefined();
      short.release();
      const other = await begun(store, "gone", { input: ERASED });
      await twoToolSteps(other.value);
      other.release();
      expect(store.conversations.checkpointInput("u", "gone")).toBe(ERASED);
      await store.deleteSession("u", "gone");
      expect(store.conversations.checkpointInput("u", "gone")).toBeUndefined();
      expect(filesHolding(dir.path, "WOMBAT")).toEqual([]);
    } finally {
      await store.stop();
    }
  });

  test("a refused turn puts back the interrupted one it found, its own long input with it", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      const interrupted = await begun(store, "s");
      await twoToolSteps(interrupted.value);
      interrupted.release();
      const refused = await begun(store, "s", { input: ERASED });
      await refused.value.save();
      await refused.value.putBack();
      refused.release();
      const resumed = await begun(store, "s", { input: "", resume: true });
      expect(resumed.value.state.user_input).toBe(LONG);
      expect(resumed.value.state.turn.map((m) => m.content)).toEqual([
        LONG,
        null,
        "result c1",
        null,
        "result c2",
      ]);
      resumed.release();
    } finally {
      await store.stop();
    }
  });

  test("a body whose input kept apart is missing is dropped with a warning, not resumed without it", async () => {
    using dir = tmpdir("local-ai-ckpt-");
    const store = Store.open(dir.path);
    try {
      const long = await begun(store, "s");
      long.release();
      // As if its row had gone: the body alone.
      const db = new Database(join(dir.path, DB_FILE));
      db.run("DELETE FROM checkpoint_inputs");
      db.close();
      const warnings: Warning[] = [];
      const again = await begun(store, "s", { input: "fresh", resume: true }, warnings);
      expect(warnings.map((w) => w.code)).toEqual(["checkpoint_reset", "nothing_to_resume"]);
      expect(again.value.state.user_input).toBe("fresh");
      again.release();
    } finally {
      await store.stop();
    }
  });
});
