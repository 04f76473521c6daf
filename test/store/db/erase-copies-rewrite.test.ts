import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eraseFromCopies } from "../../../src/store/erase-copies.ts";
import { Store } from "../../../src/store/store.ts";
import { commitNotedTurn as chat } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A copy set aside after damage is scrubbed of what a delete erases, then its pages rewritten
// (store/erase.ts rewritePages). A copy the delete took nothing from was rewritten too, on every
// delete of anyone; and where the rewrite could not run (no room for it) such a copy was removed
// whole, though it held nothing of what was erased.
describe("a copy set aside that holds nothing of an erase", () => {
  test("is not rewritten: its bytes stay as they were", async () => {
    await using dir = tmpdir();
    const store = Store.open(dir.path);
    for (let i = 0; i < 50; i++) chat(store, "alice", "s", `ZEBRAFISH ${i} `.repeat(20));
    store.close();
    const copy = join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    Bun.spawnSync(["cp", join(dir.path, "local-ai.db"), copy]);
    eraseFromCopies(dir.path, "bob");
    const before = readFileSync(copy);
    const outcomes = eraseFromCopies(dir.path, "bob");
    expect(outcomes.map((o) => o.outcome)).toEqual(["scrubbed"]);
    expect(Buffer.compare(readFileSync(copy), before)).toBe(0);
    // One that does hold the erased session is still scrubbed and rewritten.
    expect(eraseFromCopies(dir.path, "alice", "s")).toEqual([
      { path: copy, outcome: "scrubbed", deleted_sessions: 1 },
    ]);
    expect(readFileSync(copy).includes("ZEBRAFISH")).toBe(false);
  });
});

describe.skipIf(process.platform === "win32")("a link named like a copy set aside", () => {
  // The core never sets a copy aside as a link: one planted in data_dir (a folder other users
  // can write) would have had its target opened and scrubbed, or zeroed whole when not a database.
  test("is removed, the link only: its target is neither scrubbed nor zeroed", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const store = Store.open(data);
    chat(store, "alice", "s", "kept words");
    store.close();
    const victim = join(dir.path, "victim.txt");
    writeFileSync(victim, "the victim's own bytes");
    // Another folder's database, with alice's session: an erase here must not reach into it.
    const other = join(dir.path, "other");
    const otherStore = Store.open(other);
    chat(otherStore, "alice", "s", "OTHER CORE WORDS");
    otherStore.close();
    const linkToFile = join(data, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    const linkToDb = join(data, "local-ai.db.corrupt-2026-01-02T00-00-00-000Z");
    symlinkSync(victim, linkToFile);
    symlinkSync(join(other, "local-ai.db"), linkToDb);
    const outcomes = eraseFromCopies(data, "alice", "s");
    expect(outcomes.map((o) => o.outcome)).toEqual(["removed", "removed"]);
    expect(readFileSync(victim, "utf8")).toBe("the victim's own bytes");
    expect(readFileSync(join(other, "local-ai.db")).includes("OTHER CORE WORDS")).toBe(true);
    expect(lstatSync(linkToFile, { throwIfNoEntry: false })).toBeUndefined();
    expect(existsSync(linkToDb)).toBe(false);
  });
});

// The core sets a copy aside only as a file: a folder named like one threw out of its removal
// (rmSync without recursive), and with it every sessions.delete, users.delete and documents.delete.
describe("a folder named like a copy set aside", () => {
  test("is no copy: the erase goes on, the folder left as it is", async () => {
    await using dir = tmpdir();
    Store.open(dir.path).close();
    const folder = join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    mkdirSync(folder);
    writeFileSync(join(folder, "kept.txt"), "the user's own file");
    expect(eraseFromCopies(dir.path, "bob")).toEqual([]);
    expect(readFileSync(join(folder, "kept.txt"), "utf8")).toBe("the user's own file");
  });
});
