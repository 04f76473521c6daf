import { describe, expect, spyOn, test } from "bun:test";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import * as atomic from "../../../src/store/atomic.ts";
import { CheckpointSchema } from "../../../src/store/checkpoint.ts";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { eraseSession } from "../../../src/store/erase.ts";
import { eraseImported } from "../../../src/store/import-v01-erase.ts";
import { Store } from "../../../src/store/store.ts";
import { logger } from "../../../src/util/logger.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { holdImportBefore } from "../../fixtures/store-v01/hold-import.ts";
import { MemoryIndex } from "../../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../../fixtures/store-v01/session-store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const KILLED = join(import.meta.dir, "..", "..", "fixtures", "store-v01", "import-killed.ts");

/** Three sessions of ann's, two turns each, and a memory entry per session. */
function threeSessions(dataDir: string): void {
  const mem = MemoryIndex.forUser(dataDir, "ann").load();
  for (const s of ["a", "b", "c"]) {
    new SessionStore(dataDir, "ann", s).saveHistory([
      { role: "user", content: `question ${s}` },
      { role: "assistant", content: `answer ${s} about Porto` },
    ]);
    mem.addTurn({ id: s, session_id: s, text: `answer ${s} about Porto`, at: "2026-11-30T10:00:00.000Z" });
  }
}

const sessionIds = (store: Store): string[] =>
  store
    .list("ann", 10)
    .sessions.map((s) => s.session_id)
    .sort();
const recalled = (store: Store): string[] =>
  store.memory
    .search("ann", "Porto", 5, "none")
    .map((h) => h.doc.source)
    .sort();

/** Ann's three sessions in a new folder, a store opened on it, its import held before `ann/b`. */
async function heldBeforeB() {
  const dir = tmpdir();
  threeSessions(dir.path);
  const held = holdImportBefore("ann/b");
  const store = Store.open(dir.path, { beforeImportUnit: held.hook });
  await held.reached;
  return {
    dir,
    held,
    store,
    [Symbol.dispose]() {
      held.release();
      store.close();
      dir[Symbol.dispose]();
    },
  };
}

/** What the import left in the database: messages per session, memory entries, its records in meta. */
function imported(dataDir: string) {
  const db = readDb(join(dataDir, DB_FILE));
  // A closed store's thread lets its connection go as it ends, not at once.
  db.run("PRAGMA busy_timeout = 5000");
  try {
    const rows = db
      .query(
        "SELECT session_id, COUNT(*) AS n FROM messages WHERE user_id = 'ann' GROUP BY session_id ORDER BY 1",
      )
      .all() as { session_id: string; n: number }[];
    const memory = (db.query("SELECT COUNT(*) AS n FROM memory WHERE user_id = 'ann'").get() as { n: number })
      .n;
    const meta = (
      db.query("SELECT key FROM meta WHERE key LIKE 'import_v01%' ORDER BY 1").all() as { key: string }[]
    ).map((r) => r.key);
    return { messages: Object.fromEntries(rows.map((r) => [r.session_id, r.n])), memory, meta };
  } finally {
    db.close();
  }
}

describe("import of the 0.1 layout", () => {
  test("a user or session the protocol cannot name (a Windows device name) is not imported: it could never be read or erased", async () => {
    using dir = tmpdir();
    new SessionStore(dir.path, "ann", "trip").saveHistory([{ role: "user", content: "plan a trip" }]);
    new SessionStore(dir.path, "ann", "nul").saveHistory([{ role: "user", content: "a device's session" }]);
    new SessionStore(dir.path, "con", "s").saveHistory([{ role: "user", content: "a device's user" }]);
    const mem = MemoryIndex.forUser(dir.path, "ann").load();
    mem.addTurn({
      id: "x",
      session_id: "aux",
      text: "cited by a device's name",
      at: "2026-11-30T10:00:00.000Z",
    });
    const store = Store.open(dir.path);
    await store.whenImported();
    try {
      expect(store.list("ann", 10).sessions.map((s) => s.session_id)).toEqual(["trip"]);
      expect(store.list("con", 10).sessions).toEqual([]);
      expect(store.memory.search("ann", "device", 3, "other")).toEqual([]);
    } finally {
      store.close();
    }
  });

  // 0.1 sent the model a request to write a broken tool call again as a user message and kept it
  // in the history: imported as the user's, it was shown as the user's words and taken by
  // `regenerate` as the message to answer again (docs/protocol.md, the core's requests).
  test("0.1's requests to write again are imported as the core's, not the user's", async () => {
    using dir = tmpdir();
    const again =
      'Your tool call could not be used: unknown tool nope. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.';
    new SessionStore(dir.path, "ann", "s").saveHistory([
      { role: "user", content: "look it up" },
      { role: "assistant", content: "<tool_call>nope</tool_call>" },
      { role: "user", content: again },
      { role: "assistant", content: "it is 4" },
    ]);
    const store = Store.open(dir.path);
    await store.whenImported();
    try {
      const history = store.conversations.history("ann", "s");
      expect(history.map((m) => (m.role === "user" ? (m.by_core ?? false) : m.role))).toEqual([
        false,
        "assistant",
        true,
        "assistant",
      ]);
      expect(store.list("ann", 10).sessions[0]).toMatchObject({ message_count: 3 });
    } finally {
      store.close();
    }
  });

  test("a folder written by the 0.1 store: histories, an interrupted turn, memory; kept aside; once", async () => {
    using dir = tmpdir();
    // Written by the 0.1 code itself, not by hand.
    const done = new SessionStore(dir.path, "ann", "trip");
    done.saveHistory([
      { role: "user", content: "plan a trip" },
      { role: "assistant", content: "to Porto" },
    ]);
    const cut = new SessionStore(dir.path, "ann", "cut");
    cut.saveCheckpoint({
      trace_id: "t",
      user_input: "resume me",
      agent: "assistant",
      step: 1,
      parse_errors: 0,
      best_text: "",
      turn: [{ role: "user", content: "resume me" }],
    });
    const mem = MemoryIndex.forUser(dir.path, "ann").load();
    mem.addTurn({
      id: "x",
      session_id: "trip",
      text: "plan a trip\nto Porto",
      at: "2026-11-30T10:00:00.000Z",
    });
    mkdirSync(join(dir.path, "users", "ann", "sessions", "broken"), { recursive: true });
    writeFileSync(join(dir.path, "users", "ann", "sessions", "broken", "history.json"), "{not json");

    const store = Store.open(dir.path);
    await store.whenImported();
    expect(store.conversations.history("ann", "trip")).toEqual([
      { role: "user", content: "plan a trip" },
      { role: "assistant", content: "to Porto" },
    ]);
    expect(store.mustFind("ann", "trip").title).toBe("plan a trip");
    const cp = CheckpointSchema.parse(JSON.parse(store.conversations.checkpoint("ann", "cut") as string));
    expect(cp).toMatchObject({ user_input: "resume me", step: 1 });
    expect(
      store
        .list("ann", 10)
        .sessions.map((s) => s.session_id)
        .sort(),
    ).toEqual(["cut", "trip"]);
    expect(store.memory.search("ann", "Porto", 3, "other").map((h) => h.doc.source)).toEqual([
      "session:trip",
    ]);
    expect(existsSync(join(dir.path, "users"))).toBe(false);
    expect(
      existsSync(join(dir.path, "imported-0.1", "users", "ann", "sessions", "trip", "history.json")),
    ).toBe(true);
    expect(
      existsSync(join(dir.path, "imported-0.1", "users", "ann", "sessions", "broken", "history.json")),
    ).toBe(true);
    store.close();

    // A 0.1 core writing again later does not make a second import.
    new SessionStore(dir.path, "ann", "late").saveHistory([{ role: "user", content: "late" }]);
    const again = Store.open(dir.path);
    await again.whenImported();
    expect(again.conversations.session("ann", "late")).toBeUndefined();
    expect(again.conversations.history("ann", "trip")).toHaveLength(2);
    again.close();
  });

  test.skipIf(process.platform === "win32")(
    "a FIFO in a 0.1 file's place, or in memory.folders, is skipped, never waited on",
    async () => {
      using dir = tmpdir();
      const sdir = join(dir.path, "users", "ann", "sessions", "f");
      mkdirSync(sdir, { recursive: true });
      const notes = join(dir.path, "notes");
      mkdirSync(notes);
      for (const fifo of [join(sdir, "history.json"), join(sdir, "checkpoint.json"), join(notes, "pipe.md")])
        expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
      writeFileSync(join(notes, "real.md"), "a real note about herons");
      const t0 = Date.now();
      const store = Store.open(join(dir.path), { folders: [notes] });
      await store.folderIndex.start();
      await store.whenImported();
      expect(store.memory.search("ann", "herons", 3).map((h) => h.doc.source)).toEqual(["file:real.md"]);
      expect(store.list("ann", 10).sessions).toEqual([]);
      expect(Date.now() - t0).toBeLessThan(5000);
      store.close();
    },
  );

  // A heavy user's folder takes seconds: none of it on the main loop, and a core killed midway
  // (a host that kills a core that does not answer) goes on from there at its next start.
  test("a core killed during the import goes on where it stopped: nothing imported twice, the marker last", async () => {
    using dir = tmpdir();
    threeSessions(dir.path);
    const killed = Bun.spawnSync([process.execPath, KILLED, dir.path, "ann/c"], { stderr: "pipe" });
    expect(killed.signalCode).toBe("SIGKILL");
    // a and b are in, each recorded in its own transaction; no marker; the folder in place.
    expect(imported(dir.path)).toEqual({
      messages: { a: 2, b: 2 },
      memory: 0,
      meta: ["import_v01:ann/a", "import_v01:ann/b"],
    });
    expect(existsSync(join(dir.path, "users", "ann", "sessions", "a", "history.json"))).toBe(true);

    const store = Store.open(dir.path);
    await store.whenImported();
    store.close();
    expect(imported(dir.path)).toEqual({ messages: { a: 2, b: 2, c: 2 }, memory: 3, meta: ["import_v01"] });
    expect(existsSync(join(dir.path, "users"))).toBe(false);
    expect(existsSync(join(dir.path, "imported-0.1", "users", "ann", "sessions", "a", "history.json"))).toBe(
      true,
    );
  });

  test("held before a unit, the import has not finished and the store's reads wait; released, it has", async () => {
    using t = await heldBeforeB();
    let done = false;
    const waited = t.store.whenImported().then(() => {
      done = true;
    });
    // The loop is free (this test runs on it) while the import is under way.
    await Bun.sleep(0);
    expect(done).toBe(false);
    t.held.release();
    await waited;
    expect(sessionIds(t.store)).toEqual(["a", "b", "c"]);
  });

  // Another core's delete (its own import done first) while this one imports: this core's import
  // must not write the session back.
  test("a session another core erased while this one imported is not brought back", async () => {
    using t = await heldBeforeB();
    const other = openStore(t.dir.path);
    eraseSession(other.db, "ann", "b", Date.now());
    other.db.close();
    t.held.release();
    await t.store.whenImported();
    expect(sessionIds(t.store)).toEqual(["a", "c"]);
    expect(recalled(t.store)).toEqual(["session:a", "session:c"]);
  });

  // A core whose import gave up (another process's lock, a full disk) answers deletes. A core
  // starting between a users.delete's erase of the rows and its erase of the 0.1 files took its
  // erasure mark after the erase, read the files still there, and imported the user back.
  test("a users.delete by a core whose import gave up: a core starting in the middle imports none of the user back", async () => {
    using dir = tmpdir();
    threeSessions(dir.path);
    const gaveUp = Store.open(dir.path, {
      beforeImportUnit: () => Promise.reject(new Error("the database is locked")),
    });
    await gaveUp.whenImported();
    const steps = gaveUp as unknown as { v01: (w: { kind: string }) => Promise<unknown> };
    const v01 = steps.v01.bind(gaveUp);
    // Another core starts (and imports whole) as this one erases the 0.1 files.
    steps.v01 = async (w) => {
      if (w.kind === "erase") {
        const starting = Store.open(dir.path);
        await starting.whenImported();
        starting.close();
      }
      return v01(w);
    };
    await gaveUp.deleteUser("ann");
    gaveUp.close();
    expect(imported(dir.path)).toMatchObject({ messages: {}, memory: 0 });
  });

  // A unit's record names its user and session as the host gave them (an email address, say):
  // kept until the import's marker, they outlived a delete answered after an import that gave up.
  test("a delete after an import that gave up leaves no record naming the user or the session", async () => {
    using dir = tmpdir();
    threeSessions(dir.path);
    const store = Store.open(dir.path, {
      beforeImportUnit: (u) => (u === "ann/c" ? Promise.reject(new Error("disk full")) : Promise.resolve()),
    });
    await store.whenImported();
    expect(imported(dir.path).meta).toEqual(["import_v01:ann/a", "import_v01:ann/b"]);
    await store.deleteSession("ann", "a");
    expect(imported(dir.path).meta).toEqual(["import_v01:ann/b"]);
    await store.deleteUser("ann");
    expect(imported(dir.path).meta).toEqual([]);
    store.close();
    const bytes = readFileSync(join(dir.path, DB_FILE));
    expect(bytes.includes("import_v01:ann")).toBe(false);
  });

  test("a session another core erased during the import leaves no record naming it, the import given up after", async () => {
    using dir = tmpdir();
    threeSessions(dir.path);
    const store = Store.open(dir.path, {
      beforeImportUnit: async (u) => {
        if (u === "ann/b") {
          const other = openStore(dir.path);
          eraseSession(other.db, "ann", "b", Date.now());
          other.db.close();
        }
        if (u === "ann/c") throw new Error("disk full");
      },
    });
    await store.whenImported();
    store.close();
    expect(imported(dir.path)).toEqual({ messages: { a: 2 }, memory: 0, meta: ["import_v01:ann/a"] });
  });

  test("two cores importing one folder: each session once, whichever core wrote it", async () => {
    using t = await heldBeforeB();
    const second = Store.open(t.dir.path);
    await second.whenImported();
    second.close();
    t.held.release();
    await t.store.whenImported();
    t.store.close();
    expect(imported(t.dir.path)).toEqual({ messages: { a: 2, b: 2, c: 2 }, memory: 3, meta: ["import_v01"] });
  });

  test("a store stopped during the import stops after the unit under way; the next open goes on", async () => {
    using t = await heldBeforeB();
    const stopped = t.store.stop();
    t.held.release();
    await stopped;
    expect(imported(t.dir.path)).toEqual({ messages: { a: 2 }, memory: 0, meta: ["import_v01:ann/a"] });
    const again = Store.open(t.dir.path);
    await again.whenImported();
    again.close();
    expect(imported(t.dir.path)).toEqual({ messages: { a: 2, b: 2, c: 2 }, memory: 3, meta: ["import_v01"] });
  });
});

test("a delete of 'Ann' erases nothing of ann's kept 0.1 files (one folder on a case-insensitive disk)", async () => {
  using dir = tmpdir();
  threeSessions(dir.path);
  const store = Store.open(dir.path);
  await store.whenImported();
  store.close();
  const aside = join(dir.path, "imported-0.1", "users");
  const turns = readFileSync(join(aside, "ann", "memory", "turns.json"), "utf8");
  // macOS's and Windows' disks find users/ann by the name `Ann`; here a link is that other name.
  symlinkSync(join(aside, "ann"), join(aside, "Ann"));
  eraseImported(dir.path, "Ann", "a");
  expect(existsSync(join(aside, "ann", "sessions", "a", "history.json"))).toBe(true);
  expect(readFileSync(join(aside, "ann", "memory", "turns.json"), "utf8")).toBe(turns);
  eraseImported(dir.path, "Ann");
  expect(existsSync(join(aside, "ann", "sessions", "b", "history.json"))).toBe(true);
  // ann's own erase still takes hers.
  eraseImported(dir.path, "ann", "a");
  expect(existsSync(join(aside, "ann", "sessions", "a"))).toBe(false);
});

test("a kept 0.1 memory file too large to rewrite goes whole on a delete of a session it names, and stays when it names none", () => {
  using dir = tmpdir();
  const memory = join(dir.path, "imported-0.1", "users", "ann", "memory");
  mkdirSync(memory, { recursive: true });
  // Past the 256 MiB a 0.1 file is read to; sparse, so the test writes a few bytes only.
  const big = (name: string, session: string) => {
    const path = join(memory, name);
    writeFileSync(path, '{"version":1,"turns":[');
    truncateSync(path, 257 * 2 ** 20);
    appendFileSync(
      path,
      `{"id":"x","session_id":${JSON.stringify(session)},"text":"the erased words","at":"2026-01-01T00:00:00Z"}]}`,
    );
    return path;
  };
  const naming = big("turns.json", "gone");
  const other = big("turns.json.1", "kept");
  eraseImported(dir.path, "ann", "gone");
  expect(existsSync(naming)).toBe(false);
  expect(existsSync(other)).toBe(true);
});

test("a kept 0.1 memory file of another shape goes whole on a delete of a session it names, with the warning an unparseable one gets", () => {
  using dir = tmpdir();
  const memory = join(dir.path, "imported-0.1", "users", "ann", "memory");
  mkdirSync(memory, { recursive: true });
  // JSON, but not 0.1's {version: 1, turns}: the import skipped it, so its other entries exist only here.
  const path = join(memory, "turns.json");
  const turn = (session: string) => ({
    id: session,
    session_id: session,
    text: "words",
    at: "2026-01-01T00:00:00Z",
  });
  writeFileSync(path, JSON.stringify({ version: 2, turns: [turn("gone"), turn("other")] }));
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    eraseImported(dir.path, "ann", "gone");
  } finally {
    warn.mockRestore();
  }
  expect(existsSync(path)).toBe(false);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain(path);
});

/**
 * `memory` holding session "kept"'s entry, and the stale temp file a 0.1 core killed between its
 * temp file's write and the rename left (src/store/atomic.ts names it so, as does a rewrite by
 * this erase): the whole file, "gone"'s entry too, never imported. Its path.
 */
function memoryWithStaleTemp(memory: string): string {
  mkdirSync(memory, { recursive: true });
  const turn = (session: string) => ({
    id: session,
    session_id: session,
    text: `the words of ${session}`,
    at: "2026-01-01T00:00:00Z",
  });
  writeFileSync(join(memory, "turns.json"), JSON.stringify({ version: 1, turns: [turn("kept")] }));
  const stale = join(memory, ".0123456789ab.tmp");
  writeFileSync(stale, JSON.stringify({ version: 1, turns: [turn("kept"), turn("gone")] }));
  return stale;
}

test("a 0.1 write's stale temp file beside a memory file loses a deleted session's entries too", () => {
  using dir = tmpdir();
  const memory = join(dir.path, "imported-0.1", "users", "ann", "memory");
  const stale = memoryWithStaleTemp(memory);
  eraseImported(dir.path, "ann", "gone");
  const left = existsSync(stale) ? readFileSync(stale, "utf8") : "";
  expect(left).not.toContain("the words of gone");
  expect(readFileSync(join(memory, "turns.json"), "utf8")).toContain("the words of kept");
});

test("a delete erases a user's 0.1 files that another core's import moved aside while it ran", () => {
  for (const session of ["a", undefined]) {
    using dir = tmpdir();
    threeSessions(dir.path);
    const users = join(dir.path, "users");
    const kept = join(dir.path, "imported-0.1", "users", "ann");
    // Another core on the folder finishing its import (import-v01.ts keepAside): users/ moved
    // aside right after this erase found ann's folder there.
    const moveAside = () => {
      mkdirSync(join(dir.path, "imported-0.1"));
      renameSync(users, join(dir.path, "imported-0.1", "users"));
    };
    eraseImported(dir.path, "ann", session, moveAside);
    if (session === undefined) expect(existsSync(kept)).toBe(false);
    else {
      expect(existsSync(join(kept, "sessions", "a"))).toBe(false);
      expect(existsSync(join(kept, "sessions", "b"))).toBe(true);
      expect(readFileSync(join(kept, "memory", "turns.json"), "utf8")).not.toContain("answer a about");
    }
  }
});

test("a 0.1 memory file not yet imported that cannot be rewritten fails the session's erase, its other entries kept", () => {
  using dir = tmpdir();
  // users/ still in place: an import that gave up (the disk full) before ann's memory file.
  threeSessions(dir.path);
  const turns = join(dir.path, "users", "ann", "memory", "turns.json");
  const full = spyOn(atomic, "writeFileAtomic").mockImplementation(() => {
    throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
  });
  try {
    expect(() => eraseImported(dir.path, "ann", "a")).toThrow("no space left on the disk");
  } finally {
    full.mockRestore();
  }
  // Sent again with room, the erase goes through; sessions b and c's entries were never lost.
  expect(readFileSync(turns, "utf8")).toContain("answer b about Porto");
  expect(existsSync(join(dir.path, "users", "ann", "sessions", "a"))).toBe(true);
  eraseImported(dir.path, "ann", "a");
  expect(readFileSync(turns, "utf8")).not.toContain("answer a about Porto");
  expect(readFileSync(turns, "utf8")).toContain("answer c about Porto");
});

test("a stale temp file in users/ naming a deleted session goes whole on a full disk: the delete goes through", () => {
  using dir = tmpdir();
  const memory = join(dir.path, "users", "ann", "memory");
  const stale = memoryWithStaleTemp(memory);
  // A copy the import never reads: nothing of it is lost by its removal, and removing needs no room.
  const full = spyOn(atomic, "writeFileAtomic").mockImplementation(() => {
    throw Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
  });
  try {
    eraseImported(dir.path, "ann", "gone");
  } finally {
    full.mockRestore();
  }
  expect(existsSync(stale)).toBe(false);
  expect(readFileSync(join(memory, "turns.json"), "utf8")).toContain("the words of kept");
});
