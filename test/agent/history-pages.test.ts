import { Database, type Statement } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { Conversations } from "../../src/store/conversations.ts";
import { HISTORY_PAGE } from "../../src/store/session-histories.ts";
import { ChatHarness } from "./harness.ts";

const dbOf = (h: ChatHarness) => (h.services.store() as unknown as { db: Database }).db;

/** A turn of `n` messages, questions and answers by turns, for a long session in one transaction. */
function longTurn(session: string, n: number) {
  const messages = Array.from(
    { length: n },
    (_, i): ChatMessage =>
      i % 2 ? { role: "assistant", content: `a${i}` } : { role: "user", content: `q${i}` },
  );
  return { userId: "default_user", sessionId: session, agent: "plain", messages, at: new Date() };
}

/**
 * Counts the message rows the connection reads in each turn of the event loop: `most()` is the
 * largest count of one turn, so a read that holds the loop (ping and cancel unanswered) shows.
 */
function rowsPerLoopTurn(db: Database) {
  let rows = 0;
  let most = 0;
  let on = true;
  const wrapped = new WeakSet<Statement>();
  const query = db.query.bind(db);
  db.query = ((sql: string) => {
    const st = query(sql);
    if (/FROM messages/.test(sql) && !wrapped.has(st)) {
      wrapped.add(st);
      const all = st.all.bind(st);
      st.all = ((...args: Parameters<typeof all>) => {
        const out = all(...args);
        rows += out.length;
        return out;
      }) as typeof st.all;
    }
    return st;
  }) as typeof db.query;
  const turn = () => {
    most = Math.max(most, rows);
    rows = 0;
    if (on) setImmediate(turn);
  };
  setImmediate(turn);
  return {
    most: () => Math.max(most, rows),
    reset: () => {
      most = 0;
      rows = 0;
    },
    stop: () => {
      on = false;
    },
  };
}

test("a chat in a long session reads its history a page a loop turn; another connection's write of another session keeps it cached", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const n = 10 * HISTORY_PAGE;
  h.services.store().conversations.commitTurn(longTurn("s", n));
  const watch = rowsPerLoopTurn(dbOf(h));
  try {
    h.llama.script({ content: ["answer"] });
    const { terminal } = await h.chat(1, { session_id: "s", input: "next", agent: "plain" });
    expect(terminal.result).toMatchObject({ response: "answer" });
    // Read whole in the lease's write, the 20k rows held the loop in one turn.
    expect(watch.most()).toBeLessThanOrEqual(HISTORY_PAGE);
    expect(h.history("s").length).toBe(n + 2);

    // The store's thread (a document's chunks) or another core writes another session: the
    // session's cached history still stands, not read whole again.
    const other = new Database(join(h.dataDir, "local-ai.db"));
    try {
      new Conversations(other).commitTurn(longTurn("t", 2));
      watch.reset();
      const again = h.history("s");
      expect(watch.most()).toBe(0);
      expect(again.at(-1)).toMatchObject({ role: "assistant", content: "answer" });
      // A write of this session by the other connection is seen.
      new Conversations(other).commitTurn(longTurn("s", 2));
      expect(h.history("s").length).toBe(n + 4);
    } finally {
      other.close();
    }
  } finally {
    watch.stop();
  }
});

// Pages read across turns of the loop are no snapshot: another core's commit between two of them
// would leave a history with a hole or a tail from before, kept as if whole.
test("a session written between two pages of its read is not kept half old: the next read has it all", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const n = 3 * HISTORY_PAGE;
  const conversations = h.services.store().conversations;
  conversations.commitTurn(longTurn("s", n));
  const other = new Database(join(h.dataDir, "local-ai.db"));
  try {
    // The first page is read before load's first wait; the other connection writes after it.
    const loading = conversations.histories.load("default_user", "s");
    new Conversations(other).commitTurn(longTurn("s", 2));
    await loading;
    const read = h.history("s");
    expect(read.length).toBe(n + 2);
    expect(read.slice(0, 2)).toEqual([
      { role: "user", content: "q0" },
      { role: "assistant", content: "a1" },
    ]);
    expect(read.slice(-2)).toEqual(read.slice(0, 2));
  } finally {
    other.close();
  }
});

// A chat naming no session gets an id made for it: nothing stored under it to read ahead, and the
// read-ahead's stamps and empty page were on every such chat's way (docs/performance.md).
test("a chat naming no session reads no history ahead; one naming its session does", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const { histories } = h.services.store().conversations;
  const loaded: string[] = [];
  const load = histories.load.bind(histories);
  histories.load = (userId, sessionId, signal) => {
    loaded.push(sessionId);
    return load(userId, sessionId, signal);
  };
  h.llama.script({ content: ["one"] }, { content: ["two"] });
  const first = await h.chat(1, { input: "hi", agent: "plain" });
  expect(first.terminal.result).toMatchObject({ response: "one" });
  expect(loaded).toEqual([]);
  const session = (first.terminal.result as { session_id: string }).session_id;
  const second = await h.chat(2, { session_id: session, input: "again", agent: "plain" });
  expect(second.terminal.result).toMatchObject({ response: "two" });
  expect(loaded).toEqual([session]);
  expect(h.history(session).length).toBe(4);
});

// Read in one page, no turn of the loop in between: the stamp taken before it stands (any later
// write moves it); it was asked again on every named chat's way (docs/performance.md).
test("a history read in one page asks its stamp once and is served from the cache", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const { histories } = h.services.store().conversations;
  h.services.store().conversations.commitTurn(longTurn("s", 4));
  const db = dbOf(h);
  const query = db.query.bind(db);
  let stamps = 0;
  let pages = 0;
  db.query = ((sql: string) => {
    if (sql.includes("sqlite_sequence WHERE name = 'erasures'") && sql.includes("updated_at")) stamps++;
    if (/FROM messages/.test(sql)) pages++;
    return query(sql);
  }) as typeof db.query;
  await histories.load("default_user", "s");
  expect(stamps).toBe(1);
  expect(histories.read("default_user", "s").length).toBe(4);
  expect(stamps).toBe(2);
  expect(pages).toBe(1);
});
