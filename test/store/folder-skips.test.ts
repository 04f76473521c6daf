import { describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { memoryFoldersCheck } from "../../src/doctor/folders-check.ts";
import { CoreServices } from "../../src/server/services.ts";
import { listTextFiles, MAX_FILE_BYTES } from "../../src/store/folder-walk.ts";
import { Store } from "../../src/store/store.ts";
import { logger } from "../../src/util/logger.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// memory.folders skips a file over 1 MiB and one it cannot read (docs/agent.md "Memory"): each is
// logged once a process, by name and never by its text, and counted where doctor's
// memory_folders check tells the host; the cap of files counts only the files the index takes.

const SECRET = "the-canary-text";

/** `small` notes and two files over the size cap, in a folder of `dir`. */
function folder(dir: string, small: number): string {
  const notes = join(dir, "notes");
  mkdirSync(notes, { recursive: true });
  for (let i = 0; i < small; i++) writeFileSync(join(notes, `n${i}.md`), `note ${i}`);
  for (const name of ["big-a.md", "big-b.txt"])
    writeFileSync(join(notes, name), SECRET + "x".repeat(MAX_FILE_BYTES));
  return notes;
}

describe("files a memory folder skips", () => {
  test("a file that would be skipped does not make a folder full", async () => {
    using dir = tmpdir();
    const notes = folder(dir.path, 3);
    const walked = await listTextFiles(notes, [], 3);
    expect(walked.files).toHaveLength(3);
    expect(walked.full).toBe(false);
    expect(walked.skipped.map((s) => s.reason)).toEqual(["too_large", "too_large"]);
    // One more file the index would take is over the cap.
    writeFileSync(join(notes, "n3.md"), "note 3");
    expect((await listTextFiles(notes, [], 3)).full).toBe(true);
  });

  test("are logged once a process, by name, never by their text", async () => {
    using dir = tmpdir();
    const notes = folder(dir.path, 2);
    writeFileSync(join(notes, "locked.md"), `${SECRET} locked`);
    const lines: string[] = [];
    const info = spyOn(logger, "info").mockImplementation((line: string) => void lines.push(line));
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      const store = Store.open(join(dir.path, "data"), {
        folders: [notes],
        folderIndex: {
          watch: false,
          read: async (path, max) => {
            if (String(path).endsWith("locked.md")) throw new Error("EACCES: permission denied");
            return await Bun.file(String(path))
              .text()
              .then((t) => t.slice(0, max));
          },
        },
      });
      await store.folderIndex.start();
      await store.folderIndex.refresh();
      await store.folderIndex.refresh([notes]);
      expect(store.memory.search("u", "note", 10).length).toBe(2);
      store.close();
    } finally {
      info.mockRestore();
      warn.mockRestore();
    }
    expect(lines.filter((l) => l.includes("big-a.md"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("big-b.txt"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("locked.md"))).toHaveLength(1);
    expect(lines.find((l) => l.includes("big-a.md"))).toContain("over 1 MiB");
    expect(lines.join("\n")).not.toContain(SECRET);
  });

  test("a file changed and then unreadable keeps none of its old text: forgotten until it can be read", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    const file = join(notes, "diary.md");
    writeFileSync(file, "the axolotl secret");
    let locked = false;
    const store = Store.open(join(dir.path, "data"), {
      folders: [notes],
      folderIndex: {
        watch: false,
        read: async (path, max) => {
          if (locked) throw new Error("EACCES: permission denied");
          return (await Bun.file(String(path)).text()).slice(0, max);
        },
      },
    });
    await store.folderIndex.start();
    expect(store.memory.search("u", "axolotl", 5)).toHaveLength(1);
    writeFileSync(file, "the axolotl secret, and more of it");
    locked = true;
    await store.folderIndex.refresh([notes]);
    expect(store.memory.search("u", "axolotl", 5)).toEqual([]);
    store.close();
    expect(filesHolding(join(dir.path, "data"), "axolotl")).toEqual([]);
    locked = false;
    const again = Store.open(join(dir.path, "data"), { folders: [notes], folderIndex: { watch: false } });
    await again.folderIndex.start();
    expect(again.memory.search("u", "axolotl", 5)).toHaveLength(1);
    again.close();
  });

  test("doctor counts them", async () => {
    using dir = tmpdir();
    const notes = folder(dir.path, 1);
    writeFileSync(join(dir.path, "config.yaml"), `memory:\n  folders: [${JSON.stringify(notes)}]\n`);
    const loaded = new CoreServices({ configPath: "config.yaml", cwd: dir.path }).loadedConfig();
    const [check] = await memoryFoldersCheck(loaded.config, loaded.file, 3);
    expect(check?.data).toEqual({
      folders: [{ path: notes, files: 1, full: false, readable: true, skipped: 2 }],
      max_files: 3,
    });
    expect(check?.message).toContain("2 skipped");
  });
});

describe("a memory folder's files decoded as documents' are", () => {
  // Read as UTF-8 whatever they held: a UTF-16 note (Windows' "Unicode") became a NUL between
  // every letter, found by none of its words; a Latin-1 one lost its accented letters to U+FFFD;
  // binary data went into every user's memory and prompts as replacement characters and NULs.
  test("UTF-16 and Latin-1 notes are found by their words; binary data is not indexed", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    writeFileSync(
      join(notes, "wide.txt"),
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("heron migration", "utf16le")]),
    );
    writeFileSync(join(notes, "old.txt"), Buffer.from("une crème brûlée", "latin1"));
    writeFileSync(
      join(notes, "data.csv"),
      Buffer.from([0x50, 0x4b, 0x03, 0x04, 0, 0, 0x14, 0, 0x08, 0x61, 0x62]),
    );
    const store = Store.open(join(dir.path, "data"), { folders: [notes], folderIndex: { watch: false } });
    const info = spyOn(logger, "info");
    try {
      await store.folderIndex.start();
      expect(store.memory.search("u", "heron", 3).map((h) => h.doc.source)).toEqual(["file:wide.txt"]);
      expect(store.memory.search("u", "crème", 3).map((h) => h.doc.text)).toEqual(["une crème brûlée"]);
      const rows = store.memory.search("u", "pk", 3).concat(store.memory.search("u", "ab", 3));
      expect(rows.map((h) => h.doc.source)).not.toContain("file:data.csv");
      expect(
        info.mock.calls.map((c) => String(c[0])).some((m) => m.includes("data.csv is not indexed")),
      ).toBe(true);
    } finally {
      info.mockRestore();
      store.close();
    }
  });
});
