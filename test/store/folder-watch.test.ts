import { describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { worthAWalk } from "../../src/store/folder-walk.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// A memory folder changed while the core runs (docs/agent.md, "Memory"): the watch walks it
// again, and a recall never quotes a file's passage that is no longer as it was indexed.

function folderWith(dir: string, files: Record<string, string>): string {
  const folder = join(dir, "notes");
  mkdirSync(folder, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(folder, name, ".."), { recursive: true });
    writeFileSync(join(folder, name), text);
  }
  return folder;
}

const sources = (store: Store, word: string) => store.memory.search("u", word, 10).map((h) => h.doc.source);

for (const recursive of [false, true])
  describe(`a memory folder watched while the core runs (${recursive ? "one recursive watch: Windows, macOS" : "a watch per directory: Linux"})`, () => {
    test("a file removed is forgotten, and what quoted it is told, without a restart", async () => {
      using dir = tmpdir();
      const folder = folderWith(dir.path, { "a.md": "the quokka ledger", "deep/b.md": "the quokka diary" });
      const gone: string[] = [];
      const store = Store.open(join(dir.path, "data"), {
        folders: [folder],
        folderIndex: { watchSettleMs: 30, watchRecursive: recursive, onGone: (s) => gone.push(...s) },
      });
      try {
        await store.folderIndex.start();
        expect(sources(store, "quokka").sort()).toEqual(["file:a.md", "file:deep/b.md"]);
        rmSync(join(folder, "deep/b.md"));
        expect(await waitFor(() => sources(store, "quokka").length === 1, { timeoutMs: 5000 })).toBe(true);
        expect(sources(store, "quokka")).toEqual(["file:a.md"]);
        expect(gone).toEqual(["file:deep/b.md"]);
      } finally {
        store.close();
      }
    });

    test("a file edited is read again and its old words forgotten; a new file is found", async () => {
      using dir = tmpdir();
      const folder = folderWith(dir.path, { "a.md": "the wombat secret" });
      const store = Store.open(join(dir.path, "data"), {
        folders: [folder],
        folderIndex: { watchSettleMs: 30, watchRecursive: recursive },
      });
      try {
        await store.folderIndex.start();
        expect(sources(store, "wombat")).toEqual(["file:a.md"]);
        writeFileSync(join(folder, "a.md"), "nothing left here now");
        writeFileSync(join(folder, "c.txt"), "a new numbat note");
        expect(
          await waitFor(
            () => sources(store, "wombat").length === 0 && sources(store, "numbat").length === 1,
            {
              timeoutMs: 5000,
            },
          ),
        ).toBe(true);
        expect(sources(store, "nothing")).toEqual(["file:a.md"]);
      } finally {
        store.close();
      }
    });

    test("changes under a dot-folder or to another kind of file walk nothing", async () => {
      using dir = tmpdir();
      const folder = folderWith(dir.path, { "a.md": "the bilby note" });
      let walks = 0;
      const store = Store.open(join(dir.path, "data"), {
        folders: [folder],
        folderIndex: { watchSettleMs: 30, watchRecursive: recursive, onWalk: () => walks++ },
      });
      try {
        await store.folderIndex.start();
        expect(walks).toBe(1);
        mkdirSync(join(folder, ".git"));
        writeFileSync(join(folder, ".git", "index.md"), "x");
        writeFileSync(join(folder, "photo.png"), "x");
        // Well past the settle time: a walk they caused would have begun.
        await Bun.sleep(300);
        expect(walks).toBe(1);
        writeFileSync(join(folder, "d.md"), "the bandicoot note");
        expect(await waitFor(() => sources(store, "bandicoot").length === 1, { timeoutMs: 5000 })).toBe(true);
        expect(walks).toBe(2);
      } finally {
        store.close();
      }
    });

    test("a directory made while the core runs is watched from the walk that finds it", async () => {
      using dir = tmpdir();
      const folder = folderWith(dir.path, { "a.md": "the potoroo note" });
      const store = Store.open(join(dir.path, "data"), {
        folders: [folder],
        folderIndex: { watchSettleMs: 30, watchRecursive: recursive },
      });
      try {
        await store.folderIndex.start();
        mkdirSync(join(folder, "later", "deeper"), { recursive: true });
        writeFileSync(join(folder, "later", "deeper", "b.md"), "the quoll note");
        expect(await waitFor(() => sources(store, "quoll").length === 1, { timeoutMs: 5000 })).toBe(true);
        // Only the new directory's own watch sees this one.
        writeFileSync(join(folder, "later", "deeper", "b.md"), "the quoll moved away");
        expect(await waitFor(() => sources(store, "moved").length === 1, { timeoutMs: 5000 })).toBe(true);
      } finally {
        store.close();
      }
    });
  });

describe("what the watch walks for, and its cap per directory (Linux)", () => {
  test("past the cap of watched directories, a change there waits for a recall or the next start", async () => {
    using dir = tmpdir();
    const folder = folderWith(dir.path, { "a/x.md": "the kowari note", "b/y.md": "the mulgara note" });
    let walks = 0;
    const store = Store.open(join(dir.path, "data"), {
      folders: [folder],
      // The folder itself and one directory under it.
      folderIndex: { watchSettleMs: 30, watchRecursive: false, maxWatchedDirs: 2, onWalk: () => walks++ },
    });
    try {
      await store.folderIndex.start();
      // One of a/ and b/ is watched (the walk's order is the file system's): a change in each,
      // each given time for its walk, walks once.
      writeFileSync(join(folder, "a", "z.md"), "the dunnart note");
      await Bun.sleep(300);
      writeFileSync(join(folder, "b", "z.md"), "the ningaui note");
      // The watched one's walk, however late it comes on a loaded machine; then no second.
      expect(await waitFor(() => walks >= 2, { timeoutMs: 5000 })).toBe(true);
      await Bun.sleep(300);
      expect(walks).toBe(2);
    } finally {
      store.close();
    }
  });

  test("worthAWalk: dot-names and other kinds of file are not; text files, folders and unknown names are", () => {
    expect(worthAWalk("a.md")).toBe(true);
    expect(worthAWalk("deep/B.TXT")).toBe(true);
    expect(worthAWalk("deep\\b.yaml")).toBe(true);
    expect(worthAWalk("newfolder")).toBe(true);
    expect(worthAWalk(null)).toBe(true);
    expect(worthAWalk(".git/index")).toBe(false);
    expect(worthAWalk("deep/.b.md")).toBe(false);
    expect(worthAWalk("data/local-ai.db-wal")).toBe(false);
    expect(worthAWalk("photo.png")).toBe(false);
  });
});

describe("a recall checks its folder passages against the files as they are", () => {
  /** A store whose folders are not watched: only the recall's check can see a change. */
  async function unwatched(dir: string, files: Record<string, string>) {
    const folder = folderWith(dir, files);
    const store = Store.open(join(dir, "data"), { folders: [folder], folderIndex: { watch: false } });
    await store.folderIndex.start();
    return { folder, store };
  }

  test("a removed file's passage is left out, and its folder walked again", async () => {
    using dir = tmpdir();
    const { folder, store } = await unwatched(dir.path, { "a.md": "the dingo log", "b.md": "the dingo map" });
    try {
      rmSync(join(folder, "b.md"));
      const hits = store.memory.search("u", "dingo", 10);
      expect(hits.length).toBe(2);
      const kept = await store.folderIndex.current(hits);
      expect(kept.map((h) => h.doc.source)).toEqual(["file:a.md"]);
      expect(await waitFor(() => sources(store, "dingo").length === 1, { timeoutMs: 5000 })).toBe(true);
    } finally {
      store.close();
    }
  });

  test("a file changed in place (same size, new time) is left out until it is read again", async () => {
    using dir = tmpdir();
    const { folder, store } = await unwatched(dir.path, { "a.md": "the emu secret" });
    try {
      writeFileSync(join(folder, "a.md"), "the emu public");
      utimesSync(join(folder, "a.md"), new Date(), new Date(Date.now() + 5000));
      expect(await store.folderIndex.current(store.memory.search("u", "emu", 10))).toEqual([]);
      expect(await waitFor(() => sources(store, "public").length === 1, { timeoutMs: 5000 })).toBe(true);
      const now = store.memory.search("u", "emu", 10);
      expect((await store.folderIndex.current(now)).map((h) => h.doc.text)).toEqual(["the emu public"]);
    } finally {
      store.close();
    }
  });

  test("hits that are not a folder's pass untouched", async () => {
    using dir = tmpdir();
    const { store } = await unwatched(dir.path, {});
    try {
      const hit = {
        doc: { id: "1", text: "t", source: "turn:s" },
        score: 1,
        cite: { kind: "turn" as const, id: "s", chunk: 0, score: 1, name: "s" },
      };
      expect(await store.folderIndex.current([hit])).toEqual([hit]);
    } finally {
      store.close();
    }
  });
});

describe("the core's own files in a memory folder", () => {
  test("data_dir and the config file are never indexed, however the folder is reached", async () => {
    using dir = tmpdir();
    const app = folderWith(dir.path, {
      "notes.md": "the platypus note",
      "config.yaml": "llama:\n  api_key: SECRET-WALLABY\n",
      "data/kv/s-1.json": '{"record": "another user\'s WOMBATWORD"}',
      "data/export.md": "WOMBATWORD again",
    });
    const link = join(dir.path, "app-link");
    // (A link to a folder needs a privilege on Windows.)
    if (process.platform !== "win32") symlinkSync(app, link);
    for (const folder of process.platform === "win32" ? [app] : [app, link]) {
      const store = Store.open(join(dir.path, `store-${folder === app ? "a" : "b"}`), {
        folders: [folder],
        folderIndex: { watch: false, exclude: [join(app, "data"), join(app, "config.yaml")] },
      });
      try {
        await store.folderIndex.start();
        expect(sources(store, "platypus")).toEqual(["file:notes.md"]);
        expect(sources(store, "WALLABY")).toEqual([]);
        expect(sources(store, "WOMBATWORD")).toEqual([]);
      } finally {
        store.close();
      }
    }
  });

  test("files indexed before the exclusion are forgotten at the next walk, and what quoted them told", async () => {
    using dir = tmpdir();
    const app = folderWith(dir.path, { "data/kv/s-1.json": "the WOMBATWORD record" });
    const data = join(dir.path, "store");
    const first = Store.open(data, { folders: [app], folderIndex: { watch: false } });
    await first.folderIndex.start();
    expect(sources(first, "WOMBATWORD")).toEqual(["file:data/kv/s-1.json"]);
    first.close();
    const gone: string[] = [];
    const next = Store.open(data, {
      folders: [app],
      folderIndex: { watch: false, exclude: [join(app, "data")], onGone: (s) => gone.push(...s) },
    });
    try {
      await next.folderIndex.start();
      expect(sources(next, "WOMBATWORD")).toEqual([]);
      expect(gone).toEqual(["file:data/kv/s-1.json"]);
    } finally {
      next.close();
    }
  });
});

describe("a folder file's passages dropped", () => {
  test("removed or edited: its words are in no file of the data folder after the walk", async () => {
    using dir = tmpdir();
    const folder = folderWith(dir.path, { "a.md": "the GALAHWORD note", "b.md": "the CORELLAWORD note" });
    const data = join(dir.path, "data");
    const store = Store.open(data, { folders: [folder], folderIndex: { watch: false } });
    try {
      await store.folderIndex.start();
      expect(sources(store, "GALAHWORD")).toEqual(["file:a.md"]);
      expect(filesHolding(data, "GALAHWORD").length).toBeGreaterThan(0);
      rmSync(join(folder, "a.md"));
      writeFileSync(join(folder, "b.md"), "nothing of the parrot now");
      await store.folderIndex.refresh();
      expect(sources(store, "GALAHWORD")).toEqual([]);
      // The database, its log and whatever else the store keeps, while it is still open.
      expect(filesHolding(data, "GALAHWORD")).toEqual([]);
      expect(filesHolding(data, "CORELLAWORD")).toEqual([]);
    } finally {
      store.close();
    }
  });
});

describe("a walk whose listener fails", () => {
  test("the next walks still run", async () => {
    using dir = tmpdir();
    const folder = folderWith(dir.path, { "a.md": "the tuan note" });
    const store = Store.open(join(dir.path, "data"), { folders: [folder], folderIndex: { watch: false } });
    try {
      store.folderIndex.onAdded(() => {
        throw new Error("the embedder is gone");
      });
      await store.folderIndex.start();
      writeFileSync(join(folder, "b.md"), "the antechinus note");
      await store.folderIndex.refresh();
      writeFileSync(join(folder, "c.md"), "the phascogale note");
      await store.folderIndex.refresh();
      expect(sources(store, "phascogale")).toEqual(["file:c.md"]);
    } finally {
      store.close();
    }
  });
});

describe("the cap on watched directories is for all folders together", () => {
  test("a second folder past it is not watched; the first still is", async () => {
    using dir = tmpdir();
    const one = join(dir.path, "one");
    const two = join(dir.path, "two");
    mkdirSync(one);
    mkdirSync(two);
    writeFileSync(join(one, "a.md"), "the bettong note");
    writeFileSync(join(two, "b.md"), "the bilby note");
    const walked: string[] = [];
    const store = Store.open(join(dir.path, "data"), {
      folders: [one, two],
      folderIndex: {
        watchSettleMs: 30,
        watchRecursive: false,
        maxWatchedDirs: 1,
        onWalk: (r) => walked.push(r),
      },
    });
    try {
      await store.folderIndex.start();
      expect(walked).toEqual([one, two]);
      writeFileSync(join(two, "c.md"), "the mala note");
      await Bun.sleep(300);
      expect(walked).toEqual([one, two]);
      writeFileSync(join(one, "d.md"), "the boodie note");
      expect(await waitFor(() => walked.length === 3, { timeoutMs: 5000 })).toBe(true);
      expect(walked[2]).toBe(one);
    } finally {
      store.close();
    }
  });
});
