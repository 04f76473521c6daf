import { expect, spyOn, test } from "bun:test";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { logger } from "../../src/util/logger.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * A drive whose paths answer (stat'ed for real) as many times as `alive` has left for them, and
 * hang after (a hard-mounted network share gone offline) until `revive`, which answers the stats
 * that hung as the share coming back does; its wait is over at once. `asked` gets the paths that hung.
 */
function dyingDrive(alive: Map<string, number>, asked: string[]) {
  const hung: (() => void)[] = [];
  const stat = (path: string | Buffer) => {
    const p = String(path);
    const left = alive.get(p) ?? 0;
    if (left > 0) {
      alive.set(p, left - 1);
      return Promise.resolve(statSync(p));
    }
    asked.push(p);
    return new Promise((resolve) => hung.push(() => resolve(statSync(p))));
  };
  const revive = async (paths: string[]) => {
    for (const p of paths) alive.set(p, Number.POSITIVE_INFINITY);
    for (const answer of hung.splice(0)) answer();
    await Bun.sleep(0);
  };
  return { drive: new DriveAnswers({ stat, statWaitMs: 0 }), revive };
}

// The folder's drive was asked once, before its walk (folder-index.ts); the walk's own stats,
// directory reads and file reads then went straight to the file system, unbounded. A share that
// died mid-walk (the folder answered, a file below it then did not) hung that walk for good: every
// later walk of every folder queued behind it, so no change was ever indexed again until a
// restart, and each hung call held one of the runtime's few file threads.
test("a folder whose drive stops answering mid-walk fails that walk: logged and tried again", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  mkdirSync(join(folder, "sub"), { recursive: true });
  writeFileSync(join(folder, "a.md"), "the wombat burrow");
  writeFileSync(join(folder, "sub", "b.md"), "the quokka smile");
  const asked: string[] = [];
  // The folder and its first file answer; the share then goes, before the subfolder is read.
  const alive = new Map([
    [folder, Number.POSITIVE_INFINITY],
    [join(folder, "a.md"), Number.POSITIVE_INFINITY],
  ]);
  const dying = dyingDrive(alive, asked);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder],
    folderIndex: { watch: false, drives: dying.drive, retryMs: 3_600_000 },
  });
  try {
    await store.folderIndex.start();
    expect(asked).toEqual([join(folder, "sub")]);
    // Nothing of a walk that did not end is taken: what it read so far waits for the next one.
    expect(store.memory.search("u", "wombat", 5)).toEqual([]);
    expect(lines.filter((l) => l.includes(folder))).toEqual([
      `memory folder ${folder} could not be indexed: ${join(folder, "sub")}: its drive did not answer within 0 s (a network drive offline?); tried again in 3600 s`,
    ]);
    // The share is back: the next walk of the folder is not stuck behind the one that failed.
    await dying.revive([join(folder, "sub"), join(folder, "sub", "b.md")]);
    await store.folderIndex.refresh([folder]);
    expect(store.memory.search("u", "quokka", 5).map((h) => h.doc.source)).toEqual(["file:sub/b.md"]);
  } finally {
    warn.mockRestore();
    store.close();
  }
});

// The walk listed a file whose drive answered, then read it: a share that died between the two
// hung the read, a whole batch of them at once, each holding a file thread (every file read and
// write of the core waited behind them). Each read is asked of the drive first, as the walk's stats are.
test("a file whose drive stops answering before its read fails the walk, the read never sent", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  mkdirSync(folder);
  writeFileSync(join(folder, "a.md"), "the wombat burrow");
  const asked: string[] = [];
  // The file answers the listing's stat once; the share then goes, before its read.
  const alive = new Map([
    [folder, Number.POSITIVE_INFINITY],
    [join(folder, "a.md"), 1],
  ]);
  const read: string[] = [];
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder],
    folderIndex: {
      watch: false,
      drives: dyingDrive(alive, asked).drive,
      retryMs: 3_600_000,
      read: async (path) => {
        read.push(String(path));
        return "the wombat burrow";
      },
    },
  });
  try {
    await store.folderIndex.start();
    expect(read).toEqual([]);
    expect(asked).toEqual([join(folder, "a.md")]);
    expect(lines.filter((l) => l.includes(folder))).toEqual([
      `memory folder ${folder} could not be indexed: ${join(folder, "a.md")}: its drive did not answer within 0 s (a network drive offline?); tried again in 3600 s`,
    ]);
  } finally {
    warn.mockRestore();
    store.close();
  }
});

// A folder whose drive stays offline fails each walk, tried again a minute later: each failure was
// logged, the same line every minute for as long as the share was gone (1,440 a day a folder),
// burying what else the log said. It is said once, and again only when the reason changes.
test("a folder whose walk fails the same way again is logged once, not at each try", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  mkdirSync(folder);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder],
    folderIndex: { watch: false, drives: deadDrive([]), retryMs: 3_600_000 },
  });
  try {
    await store.folderIndex.start();
    // The tries the retry timer makes, made here.
    await store.folderIndex.refresh([folder]);
    await store.folderIndex.refresh([folder]);
    expect(lines.filter((l) => l.includes(folder))).toEqual([
      `memory folder ${folder} could not be indexed: its drive did not answer within 0 s (a network drive offline?); tried again in 3600 s`,
    ]);
  } finally {
    warn.mockRestore();
    store.close();
  }
});
