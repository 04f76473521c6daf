import { expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { MemoryIndex } from "../../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../../fixtures/store-v01/session-store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// 0.1 made no links. One in its folder (a user's `sessions` or `memory` folder, a history.json)
// that points out of it: the import read the text there into the user's rows, and a delete of the
// session then erased out there (a folder of another program's, removed whole) or, for a linked
// history, left the text it had imported. The import skips a linked user or session folder
// already: it reads nothing through a link, and the erases go through none.
test.skipIf(process.platform === "win32")(
  "the 0.1 import reads nothing through a link out of its folder, and a delete erases nothing there",
  async () => {
    using dir = tmpdir();
    using out = tmpdir();
    const outside = new SessionStore(out.path, "x", "trip");
    outside.saveHistory([
      { role: "user", content: "outside words" },
      { role: "assistant", content: "ok" },
    ]);
    const at = "2026-11-30T10:00:00.000Z";
    MemoryIndex.forUser(out.path, "x")
      .load()
      .addTurn({ id: "m", session_id: "trip", text: "outside note", at });
    const outUser = join(out.path, "users", "x");
    const ann = join(dir.path, "users", "ann");
    mkdirSync(ann, { recursive: true });
    symlinkSync(join(outUser, "sessions"), join(ann, "sessions"));
    symlinkSync(join(outUser, "memory"), join(ann, "memory"));
    const bobs = join(dir.path, "users", "bob", "sessions", "trip");
    mkdirSync(bobs, { recursive: true });
    symlinkSync(outside.historyPath, join(bobs, "history.json"));
    const store = Store.open(dir.path);
    await store.whenImported();
    expect(store.conversations.history("ann", "trip")).toEqual([]);
    expect(store.conversations.history("bob", "trip")).toEqual([]);
    expect(store.memory.search("ann", "outside", 5, "none")).toEqual([]);
    await store.deleteSession("ann", "trip");
    await store.deleteSession("bob", "trip");
    store.close();
    expect(readdirSync(join(outUser, "sessions", "trip"))).toEqual(["history.json"]);
    expect(readFileSync(outside.historyPath, "utf8")).toContain("outside words");
    expect(readFileSync(join(outUser, "memory", "turns.json"), "utf8")).toContain("outside note");
  },
);

// `users/` itself a link out of the data folder: the import reads nothing through it (its units
// are listed through none), yet once kept aside a delete of the user went through it and removed
// the user's folder out there, and the move aside made every folder and file there owner-only.
test.skipIf(process.platform === "win32")(
  "a linked users/ folder is neither imported nor erased through, nor its files' modes changed",
  async () => {
    using dir = tmpdir();
    using out = tmpdir();
    const outside = new SessionStore(out.path, "ann", "trip");
    outside.saveHistory([
      { role: "user", content: "outside words" },
      { role: "assistant", content: "ok" },
    ]);
    chmodSync(outside.historyPath, 0o644);
    symlinkSync(join(out.path, "users"), join(dir.path, "users"));
    const store = Store.open(dir.path);
    await store.whenImported();
    expect(store.conversations.history("ann", "trip")).toEqual([]);
    await store.deleteUser("ann");
    store.close();
    expect(readFileSync(outside.historyPath, "utf8")).toContain("outside words");
    expect(statSync(outside.historyPath).mode & 0o777).toBe(0o644);
  },
);
