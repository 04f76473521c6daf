import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Zeroes } from "../../src/agent/kv/drop-file.ts";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import { KV_RETRY_KEPT, type KvErase } from "../../src/server/kv-erase.ts";
import { logger } from "../../src/util/logger.ts";
import { saved, savingOnNoReuse } from "../fixtures/kv-saved.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A memory folder's file gone: the saved KV states quoting it are erased (docs/agent.md#prompt-reuse),
// but no request waits on that erase to fail it, and the folder's index no longer names the file.
// A state file it could not remove (data_dir/kv not writable for a while, a file held open on
// Windows) was dropped from mind: never said, never tried again, the file's words left on disk.

/** What a case gets: the folder, its erases, and user u's session `old` saved quoting `file:a.md`. */
interface Stuck {
  disk: KvDisk;
  erase: KvErase;
  /** The paths whose unlinks fail (EBUSY: held open on Windows); the old state's at first. */
  stuck: Set<string>;
  old: string;
  warned: string[];
}

async function withStuck(body: (c: Stuck) => Promise<void>): Promise<void> {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1_000_000);
  const old = await saved(disk, "old", "file:a.md");
  const stuck = new Set([old]);
  const real = fs.unlinkSync;
  const unlink = spyOn(fs, "unlinkSync").mockImplementation((path) => {
    if (stuck.has(String(path))) throw Object.assign(new Error("EBUSY: resource busy"), { code: "EBUSY" });
    real(path);
  });
  const warned: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void warned.push(line));
  try {
    await body({ disk, erase: savingOnNoReuse(disk), stuck, old, warned });
  } finally {
    unlink.mockRestore();
    warn.mockRestore();
  }
}

const sidecar = (bin: string) => bin.replace(/\.bin$/, ".json");

test("a folder file's quoting KV file that could not be removed is named in the log and tried again at the next erase", () =>
  withStuck(async ({ disk, erase, stuck, old, warned }) => {
    expect(erase.folderGone("file:a.md")).toEqual([old]);
    expect(warned.some((l) => l.includes(old))).toBe(true);
    // Still stuck at the next erase (a session's delete): it is not that delete's to fail on.
    expect(erase.forget("u", "s")).toEqual([]);
    expect(existsSync(old)).toBe(true);
    // Removable at last: the state goes, and the sidecar holding its notes with it.
    stuck.clear();
    expect(erase.forget("u", "t")).toEqual([]);
    expect(fs.readdirSync(disk.dir)).toEqual([]);
  }));

test("the folder file edited and quoted anew: the retry takes the stuck old state, never the new session's", () =>
  withStuck(async ({ disk, erase, stuck, old }) => {
    expect(erase.folderGone("file:a.md")).toEqual([old]);
    // Re-indexed under the same source string; a new session's state quotes its new text.
    const fresh = await saved(disk, "new", "file:a.md");
    stuck.clear();
    expect(erase.forget("u", "other")).toEqual([]);
    // The retry by source string erased the new session's state too (its reuse lost).
    expect(existsSync(fresh)).toBe(true);
    expect(existsSync(sidecar(fresh))).toBe(true);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(sidecar(old))).toBe(false);
  }));

test("a stuck session saved again since: its new state is not the file the erase meant, and stays", () =>
  withStuck(async ({ disk, erase, stuck, old }) => {
    erase.folderGone("file:a.md");
    stuck.clear();
    await saved(disk, "old", "file:b.md"); // renamed over the stuck one: another file
    erase.forget("u", "other");
    expect(existsSync(old)).toBe(true);
    expect(disk.entry("u", "old")?.note_sources).toEqual(["file:b.md"]);
  }));

test("a folder whose many quoting KV files are stuck keeps a bounded retry list, a state never without its sidecar", () => {
  using dir = tmpdir();
  const paths = Array.from({ length: KV_RETRY_KEPT - 1 }, (_, i) => join(dir.path, `f${i}.tmp`));
  // The last stuck one a state whose sidecar (its notes' text) stays with it: the pair does not fit.
  paths.push(join(dir.path, "s-0.bin"));
  for (const p of [...paths, join(dir.path, "s-0.json")]) writeFileSync(p, "x");
  const tried: string[][] = [];
  const disk = {
    dir: dir.path,
    zeroes: new Zeroes(),
    removeSource: () => {},
    removeSession: () => {},
    removeKept: (kept: { path: string }[]) => void tried.push(kept.map((f) => f.path)),
    unremovedBy: (erase: () => void) => {
      erase();
      return paths; // data_dir/kv not writable
    },
  } as unknown as KvDisk;
  const erase = savingOnNoReuse(disk);
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    erase.folderGone("file:big.md");
    erase.forget("u", "s");
    expect(tried).toHaveLength(1);
    expect(tried[0]?.length).toBeLessThanOrEqual(KV_RETRY_KEPT);
    // The state kept without its sidecar: removed at the retry, the sidecar left for good.
    expect(tried[0]?.filter((p) => p.includes("s-0."))).toEqual([]);
  } finally {
    warn.mockRestore();
  }
});

// A save of a quoting session under way when the folder file goes has no file yet for the erase
// to find: its removal waits for the save to be over (drop-file.ts `Zeroes.removeOnceSettled`) and
// a failure then was pushed to a list no one read again: neither said nor tried again, the file
// the save made (the folder file's words in its tokens) left on disk until a sweep found it stale
// (10 minutes unchanged, kv-temps.ts) or the next start.
test("a quoting save's file made after the folder erase, its removal failing then, is said and tried again", () =>
  withStuck(async ({ disk, erase, stuck, warned }) => {
    const temp = join(disk.dir, disk.tempName(disk.nameOf("u", "old")));
    disk.zeroes.begin(temp); // llama-server's save of session old, its task not yet run
    stuck.clear();
    stuck.add(temp);
    expect(erase.folderGone("file:a.md")).toEqual([]);
    writeFileSync(temp, "tokens quoting a.md"); // the save's task runs, then answers
    disk.zeroes.settled(temp);
    await erase.zeroed();
    expect(warned.some((l) => l.includes(temp))).toBe(true);
    stuck.clear();
    expect(erase.forget("u", "other")).toEqual([]);
    expect(existsSync(temp)).toBe(false);
  }));

// An edit (`replace_from`, `regenerate`) erases its session's tail from the saved KV state the
// same way, its session's save under way removed once over: a failure then was neither said nor
// tried again (chat.ts read the list once, at the answer), the erased tail left in the file until
// the session's delete, which may never come. Now an edit's erase keeps them as a folder's does.
test("an edit's erase: a save's file failing its removal after the answer is said and tried again", () =>
  withStuck(async ({ disk, erase, stuck, old, warned }) => {
    const temp = join(disk.dir, disk.tempName(disk.nameOf("u", "old")));
    disk.zeroes.begin(temp); // llama-server's save of session old, its task not yet run
    stuck.add(temp);
    // The state from before the edit cannot be removed now: said, and kept for the retries.
    expect(erase.edited("u", "old", "default")).toEqual([old]);
    expect(warned.some((l) => l.includes(old) && l.includes("tried again"))).toBe(true);
    writeFileSync(temp, "tokens of the erased tail"); // the save's task runs, then answers
    disk.zeroes.settled(temp);
    await erase.zeroed();
    expect(warned.some((l) => l.includes(temp) && l.includes("tried again"))).toBe(true);
    stuck.clear();
    expect(erase.forget("u", "other")).toEqual([]);
    expect(existsSync(temp)).toBe(false);
    expect(existsSync(old)).toBe(false);
  }));
