import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Warning } from "../../src/protocol/chat.ts";
import { removeStaleTemps, stageFileAtomic, writeFileAtomic } from "../../src/store/atomic.ts";
import { Bm25, tokenize } from "../../src/store/bm25.ts";
import { KeyedMutex } from "../../src/store/keyed-mutex.ts";
import { chunk, MemoryIndex } from "../../src/store/memory-index.ts";
import { SessionStore } from "../../src/store/session-store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("atomic writes", () => {
  test("replace the file and leave no temp files behind", () => {
    using dir = tmpdir();
    const p = join(dir.path, "a", "f.json");
    writeFileAtomic(p, "one");
    writeFileAtomic(p, "two");
    expect(readFileSync(p, "utf8")).toBe("two");
    expect(readdirSync(join(dir.path, "a"))).toEqual(["f.json"]);
  });

  test("a staged write: the target is the old file until commit, a discard leaves it so", () => {
    using dir = tmpdir();
    const p = join(dir.path, "a", "f.json");
    writeFileAtomic(p, "old");
    const staged = stageFileAtomic(p, "new");
    expect(readFileSync(p, "utf8")).toBe("old");
    expect(readdirSync(join(dir.path, "a")).filter((n) => n.endsWith(".tmp"))).toHaveLength(1);
    staged.commit();
    staged.commit(); // once
    expect(readFileSync(p, "utf8")).toBe("new");
    expect(readdirSync(join(dir.path, "a"))).toEqual(["f.json"]);
    const dropped = stageFileAtomic(p, "never");
    dropped.discard();
    dropped.commit(); // settled: nothing happens
    expect(readFileSync(p, "utf8")).toBe("new");
    expect(readdirSync(join(dir.path, "a"))).toEqual(["f.json"]);
  });

  test("a folder that cannot be made fails the stage, not the commit, and leaves nothing", () => {
    using dir = tmpdir();
    // A file where the folder should be: refused even to root (a read-only folder is not).
    const notDir = join(dir.path, "not-a-folder");
    writeFileSync(notDir, "");
    expect(() => stageFileAtomic(join(notDir, "f.json"), "x")).toThrow(/EEXIST|ENOTDIR/);
    expect(readdirSync(dir.path)).toEqual(["not-a-folder"]);
  });

  test("temp files a killed write left behind are removed when the session is next loaded", () => {
    using dir = tmpdir();
    const store = new SessionStore(dir.path, "u", "s");
    store.saveHistory([{ role: "user", content: "hi" }]);
    writeFileSync(join(store.dir, ".0123456789ab.tmp"), "half a wri");
    writeFileSync(join(store.dir, ".notes.tmp"), "not ours");
    expect(store.loadHistory([])).toEqual([{ role: "user", content: "hi" }]);
    expect(readdirSync(store.dir).sort()).toEqual([".notes.tmp", "history.json"]);
    expect(removeStaleTemps(join(dir.path, "missing"))).toBe(0);
  });
});

describe("SessionStore", () => {
  test("a staged checkpoint: in place on commit, before a history write, gone when superseded", () => {
    using dir = tmpdir();
    const s = new SessionStore(dir.path, "u", "s");
    const cp = (input: string) => ({
      trace_id: "t",
      user_input: input,
      agent: "a",
      step: 0,
      parse_errors: 0,
      best_text: "",
      turn: [{ role: "user" as const, content: input }],
    });
    const temps = () => readdirSync(s.dir).filter((n) => n.endsWith(".tmp"));
    s.stageCheckpoint(cp("one"));
    expect(s.loadCheckpoint([])).toBeUndefined();
    s.commitStaged();
    s.commitStaged();
    expect(s.loadCheckpoint([])?.user_input).toBe("one");
    // A history write puts a staged checkpoint in place first.
    s.stageCheckpoint(cp("two"));
    s.saveHistory([{ role: "user", content: "two" }]);
    expect(s.loadCheckpoint([])?.user_input).toBe("two");
    // A later checkpoint, or clearing it, supersedes a staged one: no temp file is left.
    s.stageCheckpoint(cp("three"));
    s.saveCheckpoint(cp("four"));
    expect(s.loadCheckpoint([])?.user_input).toBe("four");
    s.stageCheckpoint(cp("five"));
    s.clearCheckpoint();
    expect(s.loadCheckpoint([])).toBeUndefined();
    expect(temps()).toEqual([]);
  });

  test("round-trips history and checkpoints; clear removes the checkpoint", () => {
    using dir = tmpdir();
    const s = new SessionStore(dir.path, "u", "s");
    const warnings: Warning[] = [];
    expect(s.loadHistory(warnings)).toEqual([]);
    s.saveHistory([{ role: "user", content: "hi" }]);
    expect(s.loadHistory(warnings)).toEqual([{ role: "user", content: "hi" }]);
    s.saveCheckpoint({
      trace_id: "t",
      user_input: "hi",
      agent: "a",
      step: 1,
      parse_errors: 0,
      best_text: "",
      turn: [],
    });
    expect(s.loadCheckpoint(warnings)).toMatchObject({ step: 1, version: 1 });
    s.clearCheckpoint();
    expect(s.loadCheckpoint(warnings)).toBeUndefined();
    expect(warnings).toEqual([]);
  });

  test("a history of the wrong shape is moved aside with a warning naming the problem", () => {
    using dir = tmpdir();
    const s = new SessionStore(dir.path, "u", "s", () => new Date("2026-01-02T03:04:05Z"));
    mkdirSync(s.dir, { recursive: true });
    writeFileSync(s.historyPath, JSON.stringify({ version: 1, messages: [{ role: "robot" }] }));
    const warnings: Warning[] = [];
    expect(s.loadHistory(warnings)).toEqual([]);
    expect(warnings[0]?.code).toBe("history_reset");
    expect(existsSync(`${s.historyPath}.corrupt-2026-01-02T03-04-05-000Z`)).toBe(true);
    expect(existsSync(s.historyPath)).toBe(false);
  });
});

describe("BM25 and the memory index", () => {
  test("tokenize lowercases letters and digits of any script", () => {
    expect(tokenize("Hello, Wörld! x 42")).toEqual(["hello", "wörld", "42"]);
  });

  test("ranks the document with the rarer matching term first", () => {
    const b = new Bm25();
    b.add({ id: "1", text: "the cat sat on the mat", source: "a" });
    b.add({ id: "2", text: "the dog chased the cat", source: "a" });
    b.add({ id: "3", text: "quantum chromodynamics lecture notes", source: "a" });
    expect(b.search("dog cat", 3).map((h) => h.doc.id)).toEqual(["2", "1"]);
    expect(b.search("nothing matches", 3)).toEqual([]);
    expect(b.search("cat", 0)).toEqual([]);
  });

  test("persists turns, reads folders, excludes the current session", () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    writeFileSync(join(notes, "garden.md"), "Tomatoes need full sun.\n\nWater basil daily.");
    writeFileSync(join(notes, "image.png"), "tomatoes binary");
    const m = MemoryIndex.forUser(join(dir.path, "data"), "u", [notes]).load();
    m.addTurn({ id: "t1", session_id: "s1", text: "my bike is red", at: "now" });
    const again = MemoryIndex.forUser(join(dir.path, "data"), "u", [notes]).load();
    expect(again.search("what colour is my bike", 2).map((h) => h.doc.source)).toEqual(["session:s1"]);
    expect(again.search("bike", 2, "s1")).toEqual([]);
    const hits = again.search("tomatoes sun", 5);
    expect(hits.map((h) => h.doc.source)).toEqual(["file:garden.md"]);
  });

  test("chunk splits long text at paragraphs", () => {
    const parts = chunk(`${"a".repeat(1000)}\n\n${"b".repeat(1000)}\n\nc`);
    expect(parts).toHaveLength(2);
    expect(parts[1]).toContain("c");
  });
});

describe("KeyedMutex", () => {
  test("serializes one key, lets other keys through, and an aborted waiter leaves the line", async () => {
    const m = new KeyedMutex();
    const order: string[] = [];
    const never = new AbortController().signal;
    const u1 = await m.lock("a", never);
    const p2 = m.lock("a", never).then((u) => {
      order.push("second");
      return u;
    });
    const ac = new AbortController();
    const p3 = m.lock("a", ac.signal);
    const other = await m.lock("b", never);
    order.push("other");
    ac.abort(new Error("gone"));
    await expect(p3).rejects.toThrow("gone");
    order.push("release first");
    u1();
    (await p2)();
    other();
    expect(order).toEqual(["other", "release first", "second"]);
    const u4 = await m.lock("a", never);
    u4();
  });
});
