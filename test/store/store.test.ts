import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stageFileAtomic, writeFileAtomic } from "../../src/store/atomic.ts";
import { KeyedMutex } from "../../src/store/keyed-mutex.ts";
import { holdOpen } from "../fixtures/held-file.ts";
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

  // Zeroed before the call returns: the one caller of the default drop is the 0.1 erase, on the
  // store's thread (store/import-v01-erase.ts), whose delete answers as the call returns and
  // whose thread a stop terminates; a zeroing left to run after it was not waited for, and a
  // terminated thread left the unlinked file's words unzeroed for good.
  test("a temp file whose rename is refused, or that is discarded, is zeroed before the call returns", () => {
    using dir = tmpdir();
    // A folder (not empty) at the target: rename(2) of a file over it is refused (EISDIR).
    const p = join(dir.path, "sidecar.json");
    mkdirSync(join(p, "inside"), { recursive: true });
    const staged = stageFileAtomic(p, "the user's notes", "s.tmp");
    using held = holdOpen(join(dir.path, "s.tmp"));
    expect(() => staged.commit()).toThrow();
    expect(readdirSync(dir.path)).toEqual(["sidecar.json"]);
    expect(held.zeroed()).toEqual({ size: 16, allZero: true });
    const dropped = stageFileAtomic(join(dir.path, "other.json"), "more notes", "o.tmp");
    using heldToo = holdOpen(join(dir.path, "o.tmp"));
    dropped.discard();
    expect(heldToo.zeroed()).toEqual({ size: 10, allZero: true });
  });

  test("a folder that cannot be made fails the stage, not the commit, and leaves nothing", () => {
    using dir = tmpdir();
    // A file where the folder should be: refused even to root (a read-only folder is not).
    const notDir = join(dir.path, "not-a-folder");
    writeFileSync(notDir, "");
    expect(() => stageFileAtomic(join(notDir, "f.json"), "x")).toThrow(/EEXIST|ENOTDIR/);
    expect(readdirSync(dir.path)).toEqual(["not-a-folder"]);
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
