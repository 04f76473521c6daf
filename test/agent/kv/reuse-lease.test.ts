import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { writeFakeModel } from "../../fixtures/llama-stand-in/binary.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { waitFor } from "../../fixtures/wait.ts";
import { ChatHarness } from "../harness.ts";

// A slot's save against the session's lease (docs/agent.md#prompt-reuse): a core frozen past its
// lease (SIGSTOP, a debugger) wakes with a slot state older than the turn another core has taken
// over; saved then, it would overwrite that core's file, or bring back what it erased.

const USER = "default_user";

function harness() {
  return new ChatHarness(
    { agents: [{ name: "a", system_prompt: "Be brief." }], memory: { enabled: false } },
    {
      slots: 1,
      standIn: (dir) => {
        const kv = join(dir, "data", "kv");
        mkdirSync(kv, { recursive: true });
        return { modelPath: writeFakeModel(dir), slotSavePath: `${kv}/`, slots: 1, unscripted: "echo" };
      },
    },
  );
}

let id = 0;
async function say(h: ChatHarness, session: string, input: string): Promise<void> {
  const { terminal } = await h.chat(++id, { session_id: session, input });
  expect(terminal.type).toBe("result");
}

const kvFiles = (h: ChatHarness) => readdirSync(join(h.dataDir, "kv")).sort();
const saves = (h: ChatHarness) => h.llama.log.filter((l) => l.includes("action = save")).length;

/** Another core on the folder takes the session's lease (its turn of it runs there), until disposed. */
function takenElsewhere(h: ChatHarness, session: string): Disposable {
  const other = Store.open(h.dataDir, { chunkThread: false });
  expect(other.leases.tryTake(USER, session)).toBe(true);
  return { [Symbol.dispose]: () => other.close() };
}

describe("a slot's save, another core holding its session's lease", () => {
  test("held before the save: llama-server is not asked, nothing is written", async () => {
    await using h = harness();
    await say(h, "u", "a question before the unload");
    using _other = takenElsewhere(h, "u");
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(0);
    expect(kvFiles(h)).toEqual([]);
  });

  test("taken while llama-server wrote the file: nothing is put in place, no temporary file left", async () => {
    await using h = harness();
    await say(h, "w", "a question before the unload");
    const stopped = Promise.withResolvers<void>();
    await h.services.promptReuse().saveBeforeUnload(stopped.promise);
    expect(saves(h)).toBe(1);
    using _other = takenElsewhere(h, "w");
    stopped.resolve();
    const settled = () => !kvFiles(h).some((f) => f.endsWith(".tmp"));
    expect(await waitFor(settled, { timeoutMs: 5000 })).toBe(true);
    expect(kvFiles(h)).toEqual([]);
  });

  test("its own lease, or none: saved as ever", async () => {
    await using h = harness();
    await say(h, "v", "a question before the unload");
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(1);
    expect(
      await waitFor(() => kvFiles(h).length === 2 && !kvFiles(h).some((f) => f.endsWith(".tmp")), {
        timeoutMs: 5000,
      }),
    ).toBe(true);
  });

  test("of a turn that failed, taken over: not kept, even once the other core released it", async () => {
    // The slot holds the tokens of a turn never committed; saved once the other core's row is gone,
    // it overwrote that core's file with them.
    await using h = harness();
    using db = new Database(join(h.dataDir, DB_FILE));
    let took = false;
    h.onEmit = (m) => {
      // The turn's request is under way: another core takes the session over (this one frozen past its lease).
      if (m.event !== "llm_chunk" || took) return;
      took = true;
      db.run("UPDATE session_leases SET owner = 'another core' WHERE session_id = 't'");
    };
    const { terminal } = await h.chat(++id, { session_id: "t", input: "a question taken over" });
    expect(terminal).toMatchObject({ type: "error", data: { field: "session_id" } });
    db.run("DELETE FROM session_leases"); // that core's turn is over
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(0);
    expect(kvFiles(h)).toEqual([]);
  });

  test("of a session another core edited since its last turn here: not kept, nor used by its next turn", async () => {
    // The slot holds the tail the edit (`replace_from`, `regenerate`) erased; the editing core
    // removed only its own saved state, and this core's save wrote the tail back into kv/.
    await using h = harness();
    await say(h, "e", "a secret the user then edits away");
    const other = Store.open(h.dataDir, { chunkThread: false });
    try {
      const at = new Date();
      other.conversations.commitTurn({
        userId: USER,
        sessionId: "e",
        agent: "a",
        replaceFromSeq: 0,
        messages: [
          { role: "user", content: "the edited question" },
          { role: "assistant", content: "the edited answer" },
        ],
        at,
      });
    } finally {
      other.close();
    }
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(0);
    expect(kvFiles(h)).toEqual([]);
    // Its next turn here finds the slot no longer the session's: emptied in llama-server first.
    const erases = () => h.llama.log.filter((l) => l.includes("action = erase")).length;
    await say(h, "e", "a question after the edit");
    expect(erases()).toBe(1);
  });

  test("of a session whose broken-off turn another core set aside since: not kept", async () => {
    // The slot holds the interrupted turn (its words, its photo's embedding); the core that set it
    // aside by a fresh turn removed only its own saved state, and this core's save wrote it back.
    await using h = harness();
    await say(h, "g", "a secret turn the user then gives up on");
    const other = Store.open(h.dataDir, { chunkThread: false });
    try {
      other.conversations.commitTurn({
        userId: USER,
        sessionId: "g",
        agent: "a",
        setAside: true,
        messages: [
          { role: "user", content: "something new" },
          { role: "assistant", content: "ok" },
        ],
        at: new Date(),
      });
    } finally {
      other.close();
    }
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(0);
    expect(kvFiles(h)).toEqual([]);
  });

  test("a turn here that set aside a broken-off one: recorded for other cores' slots, as an edit is", async () => {
    await using h = harness();
    const input = "a secret turn the user then gives up on";
    h.writeCheckpoint("w", {
      ...{ version: 1, trace_id: "0000000000000000", user_input: input, agent: "a", step: 0 },
      ...{ parse_errors: 0, best_text: "", turn: [{ role: "user", content: input }] },
      updated_at: "2026-01-01T00:00:00.000Z",
    });
    await say(h, "w", "something new");
    using db = readDb(join(h.dataDir, DB_FILE));
    expect(db.query("SELECT COUNT(*) AS n FROM erasures").get()).toEqual({ n: 1 });
  });

  test("of a session this core edited: saved as ever, the edit's own slot holding the edited prompt", async () => {
    await using h = harness();
    await say(h, "m", "a question to edit");
    const { terminal } = await h.chat(++id, {
      session_id: "m",
      replace_from: 0,
      input: "the edited question",
    });
    expect(terminal.type).toBe("result");
    await h.services.promptReuse().saveBeforeUnload();
    expect(saves(h)).toBe(1);
  });
});
