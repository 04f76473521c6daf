import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** Every file under `dir` whose bytes hold `marker` (as UTF-8), relative paths. */
function filesHolding(dir: string, marker: string): string[] {
  const found: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (readFileSync(p).includes(Buffer.from(marker))) found.push(p.slice(dir.length + 1));
    }
  };
  walk(dir);
  return found;
}

function chat(store: Store, u: string, s: string, text: string) {
  store.conversations.commitTurn({
    userId: u,
    sessionId: s,
    agent: "a",
    messages: [
      { role: "user", content: text },
      { role: "assistant", content: `about ${text}`, reasoning: `thinking of ${text}` },
    ],
    memoryText: `${text}\nabout ${text}`,
    at: new Date(),
  });
}

/** A 0.1 data folder with one session of `user` holding `marker`, and its memory. */
function writeV01(dataDir: string, user: string, session: string, marker: string) {
  const sdir = join(dataDir, "users", user, "sessions", session);
  mkdirSync(sdir, { recursive: true });
  writeFileSync(
    join(sdir, "history.json"),
    JSON.stringify({
      version: 1,
      messages: [
        { role: "user", content: `old ${marker}` },
        { role: "assistant", content: "ok" },
      ],
    }),
  );
  const mdir = join(dataDir, "users", user, "memory");
  mkdirSync(mdir, { recursive: true });
  writeFileSync(
    join(mdir, "turns.json"),
    JSON.stringify({
      version: 1,
      turns: [
        { id: "t1", session_id: session, text: `old ${marker}`, at: "2026-01-01T00:00:00Z" },
        { id: "t2", session_id: "keep", text: "unrelated", at: "2026-01-01T00:00:00Z" },
      ],
    }),
  );
}

describe("erasing for good", () => {
  test("users.delete leaves no byte of the user's text in any file under data_dir", async () => {
    using dir = tmpdir();
    writeV01(dir.path, "alice", "old", "ZEBRAFISH");
    const store = Store.open(dir.path);
    // Enough turns that the text spreads over many pages, the index and the log.
    for (let i = 0; i < 200; i++)
      chat(store, "alice", `s${i % 7}`, `ZEBRAFISH note ${i} ${"filler ".repeat(i % 30)}`);
    chat(store, "bob", "b", "bob keeps PELICAN");
    expect(filesHolding(dir.path, "ZEBRAFISH").length).toBeGreaterThan(1);
    expect(await store.deleteUser("alice")).toBe(8);
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
    expect(store.list("alice", 10).sessions).toEqual([]);
    expect(store.memory.search("alice", "ZEBRAFISH", 5)).toEqual([]);
    expect(store.search("bob", "PELICAN", 5)).toHaveLength(2); // the question and the answer
    store.close();
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
  });

  test("sessions.delete erases that session only: its messages, reasoning, memory and 0.1 files", async () => {
    using dir = tmpdir();
    writeV01(dir.path, "alice", "old", "QUOKKA");
    const store = Store.open(dir.path);
    for (let i = 0; i < 50; i++) chat(store, "alice", "gone", `QUOKKA ${i}`);
    chat(store, "alice", "kept", "OCELOT stays");
    expect(await store.deleteSession("alice", "gone")).toBe(true);
    expect(await store.deleteSession("alice", "old")).toBe(true);
    expect(await store.deleteSession("alice", "never")).toBe(false);
    expect(filesHolding(dir.path, "QUOKKA")).toEqual([]);
    expect(store.search("alice", "OCELOT", 5)).toHaveLength(2);
    // the kept-aside memory file keeps the other session's entry
    const aside = JSON.parse(
      readFileSync(join(dir.path, "imported-0.1", "users", "alice", "memory", "turns.json"), "utf8"),
    );
    expect(aside.turns.map((t: { id: string }) => t.id)).toEqual(["t2"]);
    if (process.platform !== "win32")
      expect(
        statSync(join(dir.path, "imported-0.1", "users", "alice", "memory", "turns.json")).mode & 0o777,
      ).toBe(0o600);
    store.close();
  });
});
