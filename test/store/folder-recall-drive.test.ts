import { Database } from "bun:sqlite";
import { expect, jest, spyOn, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type StaleFiles, staleFolderFiles } from "../../src/store/folder-current.ts";
import type { MemoryHit } from "../../src/store/memory-store.ts";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { logger } from "../../src/util/logger.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Recall checks each folder passage it found against its file now (FolderIndex.current). That
// stat went straight to the drive and was awaited however long it took: a memory folder on a
// network share gone offline held every chat whose recall found one of its passages, for good on
// a hard mount, and each such chat held one more of the runtime's few file threads with it.
test("a folder passage whose drive does not answer is left out: recall does not wait on it", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  mkdirSync(folder);
  writeFileSync(join(folder, "a.md"), "the wombat burrow");
  const asked: string[] = [];
  // The folder and its file answer their walk; the file's drive then goes.
  const answering = [folder, join(folder, "a.md")];
  const dead = deadDrive(asked, answering);
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder],
    folderIndex: { watch: false, drives: dead },
  });
  try {
    await store.folderIndex.start();
    answering.pop();
    const hits = store.memory.search("u", "wombat", 5);
    expect(hits.map((h) => h.doc.source)).toEqual(["file:a.md"]);
    // It cannot be vouched for as indexed: not quoted.
    expect(await store.folderIndex.current(hits)).toEqual([]);
    expect(asked).toEqual([join(folder, "a.md")]);
  } finally {
    store.close();
  }
});

// A name that is not UTF-8 is reached by its bytes (store/folder-names.ts `onDisk`): that stat
// went to the drive on its own, outside the drive waits' lanes, so each recall of such a passage on
// a share gone offline held one more file thread for good, until every file read of the core hung.
test.if(process.platform === "linux")(
  "a passage of a file named with bytes that are not UTF-8 is checked through the drive waits too",
  async () => {
    using dir = tmpdir();
    const folder = join(dir.path, "notes");
    mkdirSync(folder);
    const file = Buffer.concat([Buffer.from(`${folder}/caf`), Buffer.from([0xe9]), Buffer.from(".md")]);
    writeFileSync(file, "the wombat burrow");
    const asked: (string | Buffer)[] = [];
    const answering = [folder, file];
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: { watch: false, drives: deadDrive(asked, answering) },
    });
    try {
      await store.folderIndex.start();
      answering.pop();
      const hits = store.memory.search("u", "wombat", 5);
      expect(hits.map((h) => h.doc.source)).toEqual(["file:caf\uFFFDe9.md"]);
      expect(await store.folderIndex.current(hits)).toEqual([]);
      // Asked once by its bytes, through the lanes; a second recall waits on the same stat.
      expect(await store.folderIndex.current(hits)).toEqual([]);
      expect(asked).toEqual([file]);
    } finally {
      store.close();
    }
  },
);

// The background walk stat'ed and read each file straight from the drive: a memory folder on a
// share gone offline hung the walk for good (every other folder after it waited too), and each
// walk asked again held another file thread. Its folder is now asked once through the drive
// waits before it is walked: one that does not answer is skipped this pass, logged, tried again.
test("a folder whose drive does not answer is not walked this pass: logged and tried again", async () => {
  using dir = tmpdir();
  const folder = join(dir.path, "notes");
  mkdirSync(folder);
  writeFileSync(join(folder, "a.md"), "the wombat burrow");
  const asked: (string | Buffer)[] = [];
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  const store = Store.open(join(dir.path, "data"), {
    folders: [folder],
    folderIndex: { watch: false, drives: deadDrive(asked), retryMs: 3_600_000 },
  });
  try {
    await store.folderIndex.start();
    expect(asked).toEqual([folder]);
    expect(store.memory.search("u", "wombat", 5)).toEqual([]);
    expect(lines.filter((l) => l.includes(folder))).toEqual([
      `memory folder ${folder} could not be indexed: its drive did not answer within 0 s (a network drive offline?); tried again in 3600 s`,
    ]);
  } finally {
    warn.mockRestore();
    store.close();
  }
});

// deadDrive's wait is over at once, so the tests above hold whatever recall waits: the second
// recall's check waits for a drive is its own, well under the drive's 30 s a model's path gets.
test("recall's check of a folder file waits a second for its drive, not the drive waits' 30 s", async () => {
  const db = new Database(":memory:");
  db.run("CREATE TABLE memory_files (path TEXT, root TEXT, size INTEGER, mtime_ms INTEGER)");
  const slow = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 30_000 });
  const hit = { doc: { id: "1", text: "t", source: "file:a.md" }, score: 1 };
  const hits = [
    { ...hit, cite: { kind: "folder", id: "/mnt/share/a.md", chunk: 0, score: 1, name: "a.md" } },
  ];
  let found: StaleFiles | undefined;
  jest.useFakeTimers();
  try {
    const turns = async () => {
      for (let i = 0; i < 10; i++) await Promise.resolve();
    };
    void staleFolderFiles(db, hits as MemoryHit[], slow).then((f) => {
      found = f;
    });
    await turns();
    jest.advanceTimersByTime(999);
    await turns();
    expect(found).toBeUndefined();
    jest.advanceTimersByTime(1);
    await turns();
    expect(found).toEqual({ stale: new Set(["/mnt/share/a.md"]), changed: new Set(), walk: false });
  } finally {
    jest.useRealTimers();
    db.close();
  }
});
