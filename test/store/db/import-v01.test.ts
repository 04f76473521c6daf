import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CheckpointSchema } from "../../../src/store/checkpoint.ts";
import { Store } from "../../../src/store/store.ts";
import { MemoryIndex } from "../../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../../fixtures/store-v01/session-store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

describe("import of the 0.1 layout", () => {
  test("a user or session the protocol cannot name (a Windows device name) is not imported: it could never be read or erased", () => {
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
  test("0.1's requests to write again are imported as the core's, not the user's", () => {
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

  test("a folder written by the 0.1 store: histories, an interrupted turn, memory; kept aside; once", () => {
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
      expect(store.memory.search("ann", "herons", 3).map((h) => h.doc.source)).toEqual(["file:real.md"]);
      expect(store.list("ann", 10).sessions).toEqual([]);
      expect(Date.now() - t0).toBeLessThan(5000);
      store.close();
    },
  );
});
