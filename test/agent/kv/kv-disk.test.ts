import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const realRename = fs.renameSync;

import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { entryOf } from "../../../src/agent/kv/kv-entry.ts";
import { emptyRecord, type PromptRecord } from "../../../src/agent/kv/prompt-record.ts";
import { pidSpace, spaceOf } from "../../../src/platform/pid-space.ts";
import { countedUse } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// The KV state folder (docs/agent.md#prompt-reuse): whole files only, owner-only, a disk budget
// with the least recently used going first, and nothing of an erased session left behind.

const FP = "f".repeat(32);

/** A save as llama-server would leave it under a temporary name, committed with its sidecar. */
function save(
  disk: KvDisk,
  user: string,
  session: string,
  bytes: number,
  at: number,
  prompt = emptyRecord(),
) {
  const name = disk.nameOf(user, session);
  const temp = disk.tempName(name);
  writeFileSync(join(disk.dir, temp), "x".repeat(bytes), { mode: 0o644 });
  const sources = [...new Set(prompt.notes.flatMap((n) => n.sources))];
  return disk.commit(temp, {
    ...entryOf(
      { userId: user, sessionId: session },
      FP,
      { n_saved: 10, n_written: bytes },
      prompt,
      sources,
      at,
    ),
  });
}

const files = (dir: string) => readdirSync(dir).sort();

/** What `make` names as the process `pid` would (another core's temporary name). */
function asPid<T>(pid: number, make: () => T): T {
  const real = process.pid;
  Object.defineProperty(process, "pid", { value: pid, configurable: true, writable: true });
  try {
    return make();
  } finally {
    Object.defineProperty(process, "pid", { value: real, configurable: true, writable: true });
  }
}

/** A save of user u's `session`, 100 bytes, as llama-server leaves it under a temporary name, and its sidecar's entry. */
function pending(disk: KvDisk, session: string) {
  const temp = disk.tempName(disk.nameOf("u", session));
  writeFileSync(join(disk.dir, temp), "x".repeat(100));
  const saved = { n_saved: 10, n_written: 100 };
  return { temp, entry: entryOf({ userId: "u", sessionId: session }, FP, saved, emptyRecord(), [], 1) };
}

describe("KvDisk", () => {
  test("a committed save: the state file and its sidecar, 0600, the temporary name gone", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    expect(await save(disk, "u", "s1", 1000, 1)).toBe(true);
    const name = disk.nameOf("u", "s1");
    expect(name).toMatch(/^s-[0-9a-f]{32}$/);
    expect(files(dir.path)).toEqual([`${name}.bin`, `${name}.json`]);
    if (process.platform !== "win32")
      for (const f of files(dir.path)) expect(statSync(join(dir.path, f)).mode & 0o777).toBe(0o600);
    expect(disk.entry("u", "s1")).toMatchObject({
      user_id: "u",
      session_id: "s1",
      fingerprint: FP,
      bytes: 1000,
    });
    expect(disk.entry("u", "other")).toBeUndefined();
    expect(await countedUse(disk)).toMatchObject({ files: 1 });
    expect((await countedUse(disk)).bytes).toBeGreaterThan(1000);
  });

  test("the budget: the least recently used go first; one that alone is too big is not kept", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 4200); // three sessions of 1000 bytes and a sidecar each
    await save(disk, "u", "old", 1000, 1);
    await save(disk, "u", "mid", 1000, 2);
    await save(disk, "u", "new", 1000, 3);
    // Restored: the oldest is now the most recently used.
    disk.touch(disk.entry("u", "old")!);
    await save(disk, "u", "newest", 1000, 4);
    const kept = ["old", "mid", "new", "newest"].filter((s) => disk.entry("u", s));
    expect(kept).not.toContain("mid");
    expect(kept).toContain("old");
    expect(kept).toContain("newest");
    expect((await countedUse(disk)).bytes).toBeLessThanOrEqual(4200);
  });

  test("a state larger than the whole budget is not kept, and evicts nothing", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 4200);
    await save(disk, "u", "a", 1000, 1);
    await save(disk, "u", "b", 1000, 2);
    expect(await save(disk, "u", "huge", 10_000, 5)).toBe(false);
    expect(disk.entry("u", "huge")).toBeUndefined();
    expect(disk.entry("u", "a")).toBeDefined();
    expect(disk.entry("u", "b")).toBeDefined();
    expect(readdirSync(dir.path).some((f) => f.endsWith(".tmp"))).toBe(false);
  });

  test("files in kv/ that are not ours count for nothing and are never removed", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 4200);
    const foreign = ["notes.bin", "notes.json", "s-short.bin", "backup.tmp"];
    for (const f of foreign) writeFileSync(join(dir.path, f), "y".repeat(20_000));
    utimesSync(join(dir.path, "backup.tmp"), new Date(0), new Date(0));
    expect(await countedUse(disk)).toEqual({ bytes: 0, files: 0 });
    expect(await save(disk, "u", "a", 1000, 1)).toBe(true);
    expect(await save(disk, "u", "b", 1000, 2)).toBe(true);
    expect(disk.entry("u", "a")).toBeDefined();
    expect((await countedUse(disk)).files).toBe(2);
    expect((await countedUse(disk)).bytes).toBeLessThan(4200);
    disk.sweep();
    disk.removeUser("u");
    for (const f of foreign) expect(existsSync(join(dir.path, f))).toBe(true);
  });

  test("a state file of ours without a readable sidecar is the first to go", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 4200);
    const orphan = `${disk.nameOf("u", "lost")}.bin`;
    writeFileSync(join(dir.path, orphan), "z".repeat(2500));
    await save(disk, "u", "a", 1000, 1);
    await save(disk, "u", "b", 1000, 2);
    expect(existsSync(join(dir.path, orphan))).toBe(false);
    expect(disk.entry("u", "a")).toBeDefined();
    expect(disk.entry("u", "b")).toBeDefined();
  });

  test("a directory where a state file belongs: no state, left alone, nothing throws", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const name = disk.nameOf("u", "s");
    mkdirSync(join(dir.path, `${name}.bin`, "inside"), { recursive: true });
    expect(disk.hasState(name)).toBe(false);
    expect(() => disk.remove(name)).not.toThrow();
    expect(await save(disk, "u", "s", 100, 1)).toBe(false);
    expect(() => disk.removeSession("u", "s")).not.toThrow();
    expect(existsSync(join(dir.path, `${name}.bin`, "inside"))).toBe(true);
    expect(readdirSync(dir.path).some((f) => f.endsWith(".tmp"))).toBe(false);
  });

  test("a regular file where the folder belongs: every call is survived", async () => {
    using dir = tmpdir();
    const kv = join(dir.path, "kv");
    writeFileSync(kv, "not a folder");
    const disk = new KvDisk(kv, 1_000_000);
    const name = disk.nameOf("u", "s");
    const entry = entryOf(
      { userId: "u", sessionId: "s" },
      FP,
      { n_saved: 1, n_written: 1 },
      emptyRecord(),
      [],
      1,
    );
    expect(() => disk.discard(disk.tempName(name))).not.toThrow();
    expect(() => disk.remove(name)).not.toThrow();
    expect(await disk.commit(disk.tempName(name), entry)).toBe(false);
    expect(() => disk.touch(entry)).not.toThrow();
    expect(() => disk.removeSession("u", "s")).not.toThrow();
    expect(() => disk.removeUser("u")).not.toThrow();
    expect(await countedUse(disk)).toEqual({ bytes: 0, files: 0 });
    expect(disk.hasState(name)).toBe(false);
  });

  test("an erased session takes its files and those of the user's sessions holding its passages", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const quoting: PromptRecord = {
      cut: 0,
      notes: [{ seq: 0, text: "Notes: …", ids: ["session:gone#1"], sources: ["session:gone"] }],
    };
    await save(disk, "u", "gone", 100, 1);
    await save(disk, "u", "quotes-it", 100, 1, quoting);
    await save(disk, "u", "unrelated", 100, 1);
    await save(disk, "v", "gone", 100, 1);
    disk.removeSession("u", "gone");
    expect(disk.entry("u", "gone")).toBeUndefined();
    expect(disk.entry("u", "quotes-it")).toBeUndefined();
    expect(disk.entry("u", "unrelated")).toBeDefined();
    expect(disk.entry("v", "gone")).toBeDefined();
    disk.removeUser("v");
    expect(disk.entry("v", "gone")).toBeUndefined();
    expect(disk.entry("u", "unrelated")).toBeDefined();
  });

  // This core's own temp is timed on its monotonic clock (kv-temps-skew.test.ts: the file's time
  // may be a file server's): stale once seen unchanged for 10 minutes, whatever its time reads.
  test("a temporary file a save never finished is swept once stale; a fresh one is left for its save", () => {
    using dir = tmpdir();
    let mono = 0;
    const disk = new KvDisk(dir.path, 1_000_000, Date.now, pidSpace, () => mono);
    const stale = join(dir.path, disk.tempName(disk.nameOf("u", "a")));
    const fresh = join(dir.path, disk.tempName(disk.nameOf("u", "b")));
    writeFileSync(stale, "half");
    const old = new Date(Date.now() - 3_600_000);
    utimesSync(stale, old, old);
    disk.sweep();
    expect(existsSync(stale)).toBe(true);
    mono += 10 * 60_000;
    writeFileSync(fresh, "half");
    disk.sweep();
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
  });

  test("a commit that cannot be made (its temporary file gone) keeps what was there", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    await save(disk, "u", "s", 100, 1);
    const before = disk.entry("u", "s");
    expect(
      await disk.commit(
        "s-missing.1-2.tmp",
        entryOf({ userId: "u", sessionId: "s" }, FP, { n_saved: 1, n_written: 1 }, emptyRecord(), [], 2),
      ),
    ).toBe(false);
    expect(disk.hasState(disk.nameOf("u", "s"))).toBe(true);
    expect(disk.entry("u", "s")?.bytes).toBe(before?.bytes as number);
  });

  // llama-server answers n_written from file.tell() and checks no flush: a full disk leaves the
  // file shorter than it says (docs/agent.md#prompt-reuse, "Faults").
  test("a rename into place refused (a state file held open on Windows): the old state goes with its sidecar", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    expect(await save(disk, "u", "s1", 1000, 1)).toBe(true);
    const rename = spyOn(fs, "renameSync").mockImplementation((from, to) => {
      if (String(to).endsWith(".bin"))
        throw Object.assign(new Error("EBUSY: resource busy"), { code: "EBUSY" });
      return realRename(from, to);
    });
    try {
      expect(await save(disk, "u", "s1", 2000, 2)).toBe(false);
    } finally {
      rename.mockRestore();
    }
    // The old state lost its sidecar with the failed commit: nothing could restore it, and
    // `users.delete`, which finds a user's files by their sidecars, could miss it. It goes too.
    expect(files(dir.path)).toEqual([]);
  });

  test("an erase takes every state file whose sidecar cannot be read: whose it is cannot be told", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    expect(await save(disk, "other", "kept", 1000, 1)).toBe(true);
    const bare = disk.nameOf("u", "bare");
    const garbled = disk.nameOf("u", "garbled");
    writeFileSync(join(dir.path, `${bare}.bin`), "z".repeat(100));
    writeFileSync(join(dir.path, `${garbled}.bin`), "z".repeat(100));
    writeFileSync(join(dir.path, `${garbled}.json`), "{not json");
    disk.removeUser("u");
    const kept = disk.nameOf("other", "kept");
    expect(files(dir.path)).toEqual([`${kept}.bin`, `${kept}.json`]);
  });

  test("a state file shorter than llama-server's n_written is not kept, what was there stays", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    await save(disk, "u", "s", 100, 1);
    const temp = disk.tempName(disk.nameOf("u", "s"));
    writeFileSync(join(disk.dir, temp), "x".repeat(60));
    const entry = entryOf(
      { userId: "u", sessionId: "s" },
      FP,
      { n_saved: 10, n_written: 100 },
      emptyRecord(),
      [],
      2,
    );
    expect(await disk.commit(temp, entry)).toBe(false);
    expect(existsSync(join(disk.dir, temp))).toBe(false);
    expect(disk.entry("u", "s")?.saved_at).toBe(1);
  });

  test("a session erased while its sidecar syncs: nothing of it is put in place, no temporary file left", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const { temp, entry } = pending(disk, "gone");
    let asked = 0;
    // `wanted` is asked after the sync, right before the renames: the erase came meanwhile.
    const kept = await disk.commit(temp, entry, () => {
      asked++;
      return false;
    });
    expect(kept).toBe(false);
    expect(asked).toBe(1);
    expect(files(dir.path)).toEqual([]);
  });

  test("erased or taken over by another core right as the renames were made: the files put in place go", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const { temp, entry } = pending(disk, "late");
    // Still wanted before the renames, no longer right after: the other core's erase of the files
    // may have come before them, so this core takes them out itself.
    let asked = 0;
    expect(await disk.commit(temp, entry, () => ++asked === 1)).toBe(false);
    expect(asked).toBe(2);
    expect(files(dir.path)).toEqual([]);
  });

  test("sessions.delete takes the session's temporary files too, whatever their age or writer", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    await save(disk, "u", "gone", 100, 1);
    await save(disk, "u", "kept", 100, 1);
    const name = disk.nameOf("u", "gone");
    // What a core killed during a save leaves: the state and the sidecar under their temporary names.
    const crashed = [`${name}.${process.pid}-0123abcd.tmp`, `${name}.${process.pid}-0123abcd.json.tmp`];
    const live = disk.tempName(disk.nameOf("u", "kept"));
    for (const f of [...crashed, live]) writeFileSync(join(dir.path, f), "the conversation");
    disk.removeSession("u", "gone");
    for (const f of crashed) expect(existsSync(join(dir.path, f))).toBe(false);
    // Another session's save under way (this process writes it) is left for it.
    expect(existsSync(join(dir.path, live))).toBe(true);
    disk.removeUser("u");
    expect(files(dir.path)).toEqual([]);
  });

  test("the sweep: a temporary file whose writer is gone goes at once, and a sidecar's unnamed leftover", () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const name = disk.nameOf("u", "a");
    // No process has this pid (Linux's largest is 4194304).
    const dead = [`${name}.99999999-0123abcd.tmp`, `${name}.99999999-0123abcd.json.tmp`, ".0123456789ab.tmp"];
    const mine = disk.tempName(name);
    for (const f of [...dead, mine, "notes.tmp"]) writeFileSync(join(dir.path, f), "half");
    disk.sweep();
    expect(files(dir.path)).toEqual([mine, "notes.tmp"].sort());
  });

  // Two containers (or machines) sharing the data folder: the other core's pid names no process
  // here, so its save was dropped at once mid-write (its state lost). A temporary name carries its
  // writer's pid space (platform/pid-space.ts); another space's waits out the age.
  test("the sweep: another pid space's save under way is left to its writer until stale", () => {
    using dir = tmpdir();
    let at = Date.now();
    // Another space's temp is timed on our monotonic clock too (kv-temps-skew.test.ts).
    let mono = 0;
    const here = new KvDisk(
      dir.path,
      1_000_000,
      () => at,
      () => "aaaaaaaaaaaa",
      () => mono,
    );
    const there = new KvDisk(
      dir.path,
      1_000_000,
      () => at,
      () => "bbbbbbbbbbbb",
    );
    // Each core's own pid, which names no process in the other's space (Linux's largest is 4194304).
    const theirs = asPid(99_999_999, () => there.tempName(there.nameOf("u", "a")));
    const ours = asPid(99_999_999, () => here.tempName(here.nameOf("u", "b")));
    for (const f of [theirs, ours]) writeFileSync(join(dir.path, f), "half");
    here.sweep();
    expect(files(dir.path)).toEqual([theirs]);
    at += 10 * 60_000 + 1_000;
    mono += 10 * 60_000 + 1_000;
    here.sweep();
    expect(files(dir.path)).toEqual([]);
  });

  // A crash or power cut mid-save, then a reboot: the temp names this host's previous boot, read
  // as another pid space, and its session's tokens stayed 10 minutes (a sessions.delete meanwhile
  // left them behind). A previous boot's writer is gone; another machine's still waits out the age.
  test("the sweep: a previous boot's temp goes at once, another machine's stays", () => {
    using dir = tmpdir();
    const ns = "pid:[4026531836]";
    const here = new KvDisk(dir.path, 1_000_000, Date.now, () => spaceOf("box", "boot-2", ns));
    const before = new KvDisk(dir.path, 1_000_000, Date.now, () => spaceOf("box", "boot-1", ns));
    const there = new KvDisk(dir.path, 1_000_000, Date.now, () => spaceOf("other", "boot-1", ns));
    // Our own pid: alive here, as any pid may be after a reboot.
    const old = before.tempName(before.nameOf("u", "a"));
    const theirs = there.tempName(there.nameOf("u", "b"));
    // Another machine of this host's name, writing now: read as a previous boot by its name alone.
    const live = before.tempName(before.nameOf("u", "c"));
    for (const f of [old, theirs, live]) writeFileSync(join(dir.path, f), "half");
    // Last written before this boot began (the test machine's): 1970.
    utimesSync(join(dir.path, old), 1, 1);
    here.sweep();
    expect(files(dir.path)).toEqual([theirs, live].sort());
  });

  // A passing read failure of the boot's id at start-up (EMFILE) gives a partial pid space, asked
  // again later (platform/pid-space.ts `cachedSpace`): taken once, every temp the core named for
  // its life read as another machine's to its own pid space's cores, waited out for its age.
  test("a temp's name takes the pid space as it is at the save, whole once it is read whole", () => {
    const ns = "pid:[4026531836]";
    let space = spaceOf("box", "", ns);
    const disk = new KvDisk("", 1_000_000, Date.now, () => space);
    expect(disk.tempName("s-a")).toEndWith(`-${space}.tmp`);
    space = spaceOf("box", "boot-1", ns);
    expect(disk.tempName("s-a")).toEndWith(`-${space}.tmp`);
  });

  test("a sidecar is written under a temporary name of ours, so a crash's leftover is known", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const name = disk.nameOf("u", "s");
    const temp = disk.tempName(name);
    writeFileSync(join(disk.dir, temp), "x".repeat(100));
    let during: string[] | undefined;
    const entry = entryOf(
      { userId: "u", sessionId: "s" },
      FP,
      { n_saved: 10, n_written: 100 },
      emptyRecord(),
      [],
      1,
    );
    expect(
      await disk.commit(temp, entry, () => {
        // Asked before the renames (then again after them).
        during ??= files(dir.path);
        return true;
      }),
    ).toBe(true);
    expect(during?.filter((f) => f !== temp)).toEqual([
      expect.stringMatching(new RegExp(`^${name}\\.${process.pid}-[0-9a-f]{8}-[0-9a-f]{18}\\.json\\.tmp$`)),
    ]);
  });

  test("an erased document takes the files of the user's sessions whose notes quote it, and no others", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const quoting: PromptRecord = {
      cut: 0,
      notes: [{ seq: 0, text: "Notes: …", ids: ["document:doc-1#0"], sources: ["document:doc-1"] }],
    };
    await save(disk, "u", "quotes-it", 100, 1, quoting);
    await save(disk, "u", "unrelated", 100, 1);
    await save(disk, "v", "quotes-it", 100, 1, quoting);
    disk.removeSource("u", "document:doc-1");
    expect(disk.entry("u", "quotes-it")).toBeUndefined();
    expect(disk.entry("u", "unrelated")).toBeDefined();
    expect(disk.entry("v", "quotes-it")).toBeDefined();
  });

  // A restore reads the sidecar, waits for llama-server (seconds for a big state), then touches it.
  test("a restore's touch does not write back the sidecar of a state erased while it was restored", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    const quoting: PromptRecord = {
      cut: 0,
      notes: [{ seq: 0, text: "Notes: QUAGGA-7731", ids: ["document:doc-1#0"], sources: ["document:doc-1"] }],
    };
    await save(disk, "u", "z", 100, 1, quoting);
    const restored = disk.entry("u", "z")!;
    disk.removeSource("u", "document:doc-1");
    expect(files(dir.path)).toEqual([]);
    disk.touch(restored);
    expect(files(dir.path)).toEqual([]);
  });

  test("a restore's touch does not describe a newer state (another core's save) with the one it read", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 1_000_000);
    await save(disk, "u", "z", 100, 1);
    const restored = disk.entry("u", "z")!;
    const quoting: PromptRecord = {
      cut: 0,
      notes: [{ seq: 0, text: "Notes: …", ids: ["document:doc-1#0"], sources: ["document:doc-1"] }],
    };
    await save(disk, "u", "z", 200, 2, quoting);
    disk.touch(restored);
    // The newer state holds the document: its sidecar must still say so, or documents.delete misses it.
    expect(disk.entry("u", "z")).toMatchObject({ bytes: 200, note_sources: ["document:doc-1"] });
    disk.removeSource("u", "document:doc-1");
    expect(files(dir.path)).toEqual([]);
  });
});
