import { expect, spyOn, test } from "bun:test";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { listTextFiles } from "../../src/store/folder-walk.ts";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { logger } from "../../src/util/logger.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * realpath spied on: each path it is called with noted (then answered for real). On a hard-mounted
 * share gone offline it never answers, so a call with a path whose drive did not answer is a walk
 * held for good (and every walk queued behind it).
 */
function spyRealpath(called: string[]) {
  const original = fsp.realpath;
  return spyOn(fsp, "realpath").mockImplementation(((path: string, ...rest: never[]) => {
    called.push(String(path));
    return (original as (p: string, ...r: never[]) => Promise<string>)(path, ...rest);
  }) as typeof fsp.realpath);
}

// A folder's walk compared the other memory folders' real paths (foldersWithin: one inside it is
// left to its own walk), realpath'ing each of them before anything was asked of their drives: a
// second folder on a share gone offline held the first folder's walk for good, and every later
// walk of every folder queued behind it, though the first folder's own drive answered.
test("another memory folder whose drive does not answer does not hold a folder's walk", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  const share = join(dir.path, "share");
  mkdirSync(folder);
  mkdirSync(share);
  writeFileSync(join(folder, "a.md"), "the wombat burrow");
  const asked: (string | Buffer)[] = [];
  const called: string[] = [];
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  // Only the share hangs (its stat never answers); lanes to spare, so that it alone is late (with
  // every lane held by a stat that hangs, every path is late: util/drive-answers.ts).
  const stat = (path: string | Buffer) => {
    // At once, not off the loop: a stat off the loop raced the wait of 0 ms, and lost under load.
    if (String(path) !== share) return Promise.resolve(statSync(path));
    asked.push(path);
    return new Promise(() => {});
  };
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder, share],
    folderIndex: {
      watch: false,
      drives: new DriveAnswers({ stat, statWaitMs: 0, lanes: 4 }),
      retryMs: 3_600_000,
    },
  });
  const real = spyRealpath(called);
  try {
    await store.folderIndex.start();
    expect(called).not.toContain(share);
    expect(asked).toContain(share);
    expect(store.memory.search("u", "wombat", 5).map((h) => h.doc.source)).toEqual(["file:a.md"]);
  } finally {
    real.mockRestore();
    warn.mockRestore();
    store.close();
  }
});

// doctor's memory_folders walks each folder with no look at its drive first (store/folder-index.ts
// asks it before its walk): the walk's realpath of the folder itself, before its first directory
// was asked of the drive, held doctor for good on a share gone offline.
test("a walk asks the folder's drive before its realpath", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "share");
  mkdirSync(folder);
  const asked: (string | Buffer)[] = [];
  const called: string[] = [];
  const real = spyRealpath(called);
  try {
    const walked = listTextFiles(folder, [join(dir.path, "data")], 10, deadDrive(asked));
    await expect(walked).rejects.toThrow("its drive did not answer within 0 s");
    expect(called).not.toContain(folder);
    expect(asked).toEqual([folder]);
  } finally {
    real.mockRestore();
  }
});
