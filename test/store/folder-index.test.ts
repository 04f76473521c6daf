import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { batches } from "../../src/store/folder-walk.ts";
import { Store } from "../../src/store/store.ts";
import { logger } from "../../src/util/logger.ts";
import { FileTooLarge, NotRegularFile, readSmallFileAsync } from "../../src/util/read-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// The memory.folders index off the hot path (docs/agent.md, "Memory"): files read a batch at a
// time under a byte cap, each batch committed on its own, the event loop given back between.

function notes(dir: string, count: number, bytes: number): string {
  const folder = join(dir, "notes");
  mkdirSync(folder, { recursive: true });
  for (let i = 0; i < count; i++) {
    const body = `note ${i} word${i} `.padEnd(bytes, "lorem ipsum ");
    writeFileSync(join(folder, `n${i}.md`), body);
  }
  return folder;
}

describe("the memory.folders index", () => {
  test("files are read a batch at a time: never more than the byte cap held between two commits", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 60, 10_000);
    const cap = 32 * 1024;
    let held = 0;
    let most = 0;
    let reads = 0;
    const seen: { files: number; bytes: number }[] = [];
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: {
        batchBytes: cap,
        batchFiles: 8,
        read: async (path, maxBytes) => {
          const text = readFileSync(path, "utf8");
          expect(text.length).toBeLessThanOrEqual(maxBytes);
          reads++;
          held += text.length;
          most = Math.max(most, held);
          return text;
        },
        onBatch: (b) => {
          seen.push(b);
          held = 0;
        },
      },
    });
    await store.folderIndex.start();
    expect(reads).toBe(60);
    expect(most).toBeLessThanOrEqual(cap);
    // 10 KB files under a 32 KiB cap: three to a batch.
    expect(seen.length).toBe(20);
    for (const b of seen) expect(b.bytes).toBeLessThanOrEqual(cap);
    expect(store.memory.search("u", "word59", 3).map((h) => h.doc.source)).toEqual(["file:n59.md"]);
    store.close();
  });

  test("other work runs between batches, and a search meanwhile finds what is indexed so far", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 40, 500);
    const order: string[] = [];
    let found: number | undefined;
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: { batchFiles: 4, onBatch: () => order.push("batch") },
    });
    const tick = () =>
      setImmediate(() => {
        order.push("other");
        if (order.filter((o) => o === "batch").length === 2 && found === undefined)
          found = store.memory.search("u", "note", 50).length;
        if (order.filter((o) => o === "batch").length < 10) tick();
      });
    tick();
    await store.folderIndex.start();
    const batchesAt = order.flatMap((o, i) => (o === "batch" ? [i] : []));
    expect(batchesAt.length).toBe(10);
    // Between every two batches, the loop served something else.
    for (let i = 1; i < batchesAt.length; i++)
      expect(order.slice((batchesAt[i - 1] as number) + 1, batchesAt[i]).includes("other")).toBe(true);
    expect(found).toBe(8);
    store.close();
  });

  test("a store closed while indexing: no batch touches it after, nothing throws", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 40, 500);
    let reads = 0;
    let store: Store | undefined;
    store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: {
        batchFiles: 4,
        read: async (path) => {
          reads++;
          return readFileSync(path, "utf8");
        },
        onBatch: () => store?.close(),
      },
    });
    await store.folderIndex.start();
    expect(reads).toBe(4);
    store = Store.open(join(dir.path, "data"), { folders: [folder] });
    await store.folderIndex.start();
    expect(store.memory.search("u", "note", 50).length).toBe(40);
    store.close();
  });

  test("an unchanged file is not read again at the next start", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 5, 500);
    // A modification time with a fraction of a millisecond, as most file systems keep.
    utimesSync(join(folder, "n0.md"), new Date(), new Date(1_700_000_000_123.456));
    const data = join(dir.path, "data");
    const first = Store.open(data, { folders: [folder] });
    await first.folderIndex.start();
    first.close();
    const read: string[] = [];
    const again = Store.open(data, {
      folders: [folder],
      folderIndex: {
        read: async (path) => {
          read.push(String(path));
          return readFileSync(path, "utf8");
        },
      },
    });
    await again.folderIndex.start();
    expect(read).toEqual([]);
    expect(again.memory.search("u", "note", 50).length).toBe(5);
    again.close();
  });

  test("batches: a file bigger than the cap goes alone; order is kept", () => {
    const f = (size: number) => ({ path: String(size), size, mtimeMs: 0 });
    const sizes = [...batches([f(10), f(20), f(100), f(5), f(5), f(5)], 2, 40)].map((b) =>
      b.map((x) => x.size),
    );
    expect(sizes).toEqual([[10, 20], [100], [5, 5], [5]]);
  });

  test.skipIf(process.platform === "win32")(
    "the default reader: a FIFO or a folder is refused before any read, a file past its size too",
    async () => {
      using dir = tmpdir();
      const fifo = join(dir.path, "pipe.md");
      expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
      await expect(readSmallFileAsync(fifo, 100)).rejects.toBeInstanceOf(NotRegularFile);
      await expect(readSmallFileAsync(dir.path, 100)).rejects.toBeInstanceOf(NotRegularFile);
      const file = join(dir.path, "grown.md");
      writeFileSync(file, "x".repeat(200));
      await expect(readSmallFileAsync(file, 100)).rejects.toBeInstanceOf(FileTooLarge);
      expect(await readSmallFileAsync(file, 200)).toBe("x".repeat(200));
    },
  );
});

/** A folder of `count` files walked twice under a cap of 3: what was found, and the warnings logged. */
async function walkedUnderACapOf3(count: number): Promise<{ found: number; lines: string[]; notes: string }> {
  using dir = tmpdir();
  const notes = join(dir.path, "notes");
  mkdirSync(notes);
  for (let i = 0; i < count; i++) writeFileSync(join(notes, `n${i}.md`), `note ${i}`);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    const store = Store.open(join(dir.path, "data"), {
      folders: [notes],
      folderIndex: { watch: false, maxFiles: 3 },
    });
    await store.folderIndex.start();
    await store.folderIndex.refresh();
    const found = store.memory.search("u", "note", 10).length;
    store.close();
    return { found, lines, notes };
  } finally {
    warn.mockRestore();
  }
}

describe("a folder over the cap of files", () => {
  test("is logged once, however often it is walked", async () => {
    const { found, lines, notes } = await walkedUnderACapOf3(5);
    expect(found).toBe(3);
    expect(lines).toEqual([
      `memory folder ${notes} holds more than 3 text files: only 3 of them are indexed; name its subfolders in memory.folders instead`,
    ]);
  });

  test("a folder at the cap exactly is not over it", async () => {
    const { found, lines } = await walkedUnderACapOf3(3);
    expect(found).toBe(3);
    expect(lines).toEqual([]);
  });
});

describe("a walk the database refused", () => {
  // Seen through the compiled core on a full tmpfs: the walk failed once, nothing walked the
  // folder again until a file in it changed or the core restarted (288 of 3,000 files indexed
  // after the disk had room again). Read-only stands in for full: both refuse the batch.
  test("is tried again later, and the folder is indexed once the database takes writes", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 20, 500);
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: { watch: false, retryMs: 200 },
    });
    const db = (store as unknown as { db: import("bun:sqlite").Database }).db;
    const files = () => (db.query("SELECT COUNT(*) AS n FROM memory_files").get() as { n: number }).n;
    const warn = spyOn(logger, "warn").mockImplementation(() => {});
    try {
      db.run("PRAGMA query_only = 1");
      await store.folderIndex.start();
      db.run("PRAGMA query_only = 0");
      expect(files()).toBe(0);
      expect(warn.mock.calls.some(([m]) => String(m).includes("could not be indexed"))).toBe(true);
      expect(await waitFor(() => files() >= 20, { intervalMs: 50 })).toBe(true);
      expect(files()).toBe(20);
    } finally {
      warn.mockRestore();
      store.close();
    }
  });
});

describe("the memory.folders index and a write lock held elsewhere", () => {
  // Its batches went straight to the connection, whose busy wait is 20 ms: another core's commit,
  // or this core's own chunk thread storing a document, failed the walk, which waited a minute.
  test("a batch waits for the lock as the store's writes do, and the walk goes on", async () => {
    using dir = tmpdir();
    const folder = notes(dir.path, 3, 200);
    const store = Store.open(join(dir.path, "data"), { folders: [folder], folderIndex: { watch: false } });
    store.memory.search("u", "warm", 1);
    const other = new Database(join(dir.path, "data", "local-ai.db"));
    other.run("BEGIN IMMEDIATE");
    const released = Bun.sleep(300).then(() => other.run("COMMIT"));
    const warn = spyOn(logger, "warn");
    try {
      await store.folderIndex.start();
      await released;
      expect(
        warn.mock.calls.map((c) => String(c[0])).filter((m) => m.includes("could not be indexed")),
      ).toEqual([]);
      expect(store.memory.search("u", "word2", 3).map((h) => h.doc.source)).toEqual(["file:n2.md"]);
    } finally {
      warn.mockRestore();
      other.close();
      store.close();
    }
  });
});

describe("a file read while the core is out of open files", () => {
  // 08cdb056 made a listing at EMFILE fail the walk, to be tried again; a file's own read at
  // EMFILE was still taken for a file that cannot be read: a changed one's passages forgotten,
  // a new one left out, and nothing walked the folder again until a change or a restart.
  test("fails the walk, tried again later: the file's new text is indexed", async () => {
    using dir = tmpdir();
    const folder = join(dir.path, "notes");
    mkdirSync(folder);
    const file = join(folder, "a.md");
    writeFileSync(file, "the pelican nests by the harbour");
    let outOfFiles = false;
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      folderIndex: {
        watch: false,
        retryMs: 50,
        read: async (path) => {
          if (outOfFiles) {
            outOfFiles = false;
            throw Object.assign(new Error("EMFILE: too many open files"), { code: "EMFILE" });
          }
          return readFileSync(path, "utf8");
        },
      },
    });
    const warn = spyOn(logger, "warn").mockImplementation(() => {});
    try {
      await store.folderIndex.start();
      writeFileSync(file, "a heron stands in the reeds, longer now");
      outOfFiles = true;
      await store.folderIndex.refresh([folder]);
      const found = () => store.memory.search("u", "heron", 5).map((h) => h.doc.source);
      expect(await waitFor(() => found().length > 0, { intervalMs: 50 })).toBe(true);
    } finally {
      warn.mockRestore();
      store.close();
    }
  });
});
