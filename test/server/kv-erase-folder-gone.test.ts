import { expect, spyOn, test } from "bun:test";
import type { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import { KV_RETRY_KEPT, KvErase } from "../../src/server/kv-erase.ts";
import { logger } from "../../src/util/logger.ts";

// A memory folder's file gone: the saved KV states quoting it are erased (docs/agent.md#prompt-reuse),
// but no request waits on that erase to fail it, and the folder's index no longer names the file.
// A state file it could not remove (data_dir/kv not writable for a while, a file held open on
// Windows) was dropped from mind: never said, never tried again, the file's words left on disk.

/** Saving on, no prompt reuse made yet: the erases are the folder's own passes. */
const savingOnNoReuse = (disk: KvDisk) =>
  new KvErase({
    dir: () => "/data/kv",
    budgeted: () => disk,
    made: () => disk,
    reuse: () => undefined,
    several: () => undefined,
  });

test("a folder file's quoting KV file that could not be removed is named in the log and tried again at the next erase", () => {
  const removed: string[][] = [];
  let stuckFile = true;
  const disk = {
    removeSource: (_user: string | undefined, ...sources: string[]) => void removed.push(sources),
    removeSession: () => {},
    unremovedBy: (erase: () => void) => {
      erase();
      return stuckFile ? ["/data/kv/s-0123.bin"] : [];
    },
  } as unknown as KvDisk;
  const erase = savingOnNoReuse(disk);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    expect(erase.folderGone("file:notes/a.md")).toEqual(["/data/kv/s-0123.bin"]);
    expect(lines.some((l) => l.includes("/data/kv/s-0123.bin"))).toBe(true);
    // The next erase (a session's delete) tries it again, apart: still stuck, it is not that delete's.
    stuckFile = false;
    expect(erase.forget("u", "s")).toEqual([]);
    expect(removed).toEqual([["file:notes/a.md"], ["file:notes/a.md"]]);
    // Removed at last: not tried again.
    erase.forget("u", "t");
    expect(removed).toHaveLength(2);
  } finally {
    warn.mockRestore();
  }
});

test("tried again while still stuck: kept for the erase after, and the erase at hand answers for its own files only", () => {
  const removed: string[][] = [];
  const disk = {
    removeSource: (_user: string | undefined, ...sources: string[]) => void removed.push(sources),
    removeSession: () => {},
    unremovedBy: (erase: () => void) => {
      const before = removed.length;
      erase();
      return removed.length > before ? ["/data/kv/s-0123.bin"] : [];
    },
  } as unknown as KvDisk;
  const erase = savingOnNoReuse(disk);
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    erase.folderGone("file:a.md");
    expect(erase.forget("u", "s")).toEqual([]);
    erase.forget("u", "t");
    expect(removed).toEqual([["file:a.md"], ["file:a.md"], ["file:a.md"]]);
  } finally {
    warn.mockRestore();
  }
});

test("a folder of 100k files gone while a KV file is stuck keeps a bounded retry list", () => {
  const removed: number[] = [];
  const disk = {
    removeSource: (_user: string | undefined, ...sources: string[]) => void removed.push(sources.length),
    removeSession: () => {},
    unremovedBy: (erase: () => void) => {
      erase();
      return ["/data/kv/s-0123.bin"]; // data_dir/kv not writable
    },
  } as unknown as KvDisk;
  const erase = savingOnNoReuse(disk);
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const files = Array.from({ length: 100_000 }, (_, i) => `file:big/${i}.md`);
    erase.folderGone(...files);
    // Each later erase (every sessions.delete on the main loop) tried all 100k again, kept for good.
    erase.forget("u", "s");
    expect(removed).toHaveLength(2);
    expect(removed.at(-1)).toBeLessThanOrEqual(KV_RETRY_KEPT);
  } finally {
    warn.mockRestore();
  }
});
