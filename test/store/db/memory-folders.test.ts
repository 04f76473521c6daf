import { describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chunk } from "../../../src/store/memory-store.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

describe("memory.folders in the index", () => {
  test("text files are indexed, others skipped; a changed file is read again, a removed one forgotten", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(join(notes, "deep"), { recursive: true });
    writeFileSync(join(notes, "garden.md"), "Tomatoes need full sun.\n\nWater basil daily.");
    writeFileSync(join(notes, "deep", "bikes.txt"), "The tandem needs new brakes.");
    writeFileSync(join(notes, "image.png"), "tomatoes binary");
    writeFileSync(join(notes, ".hidden.md"), "tomatoes secret");
    const data = join(dir.path, "data");
    const first = Store.open(data, { folders: [notes] });
    await first.folderIndex.start();
    expect(first.memory.search("u", "tomatoes sun", 5).map((h) => h.doc.source)).toEqual(["file:garden.md"]);
    expect(first.memory.search("u", "tandem brakes", 5).map((h) => h.doc.source)).toEqual([
      "file:deep/bikes.txt",
    ]);
    first.close();

    writeFileSync(join(notes, "garden.md"), "Peppers like heat.");
    utimesSync(join(notes, "garden.md"), new Date(), new Date(Date.now() + 5000));
    rmSync(join(notes, "deep", "bikes.txt"));
    const second = Store.open(data, { folders: [notes] });
    await second.folderIndex.start();
    expect(second.memory.search("u", "tomatoes", 5)).toEqual([]);
    expect(second.memory.search("u", "peppers heat", 5).map((h) => h.doc.text)).toEqual([
      "Peppers like heat.",
    ]);
    expect(second.memory.search("u", "tandem", 5)).toEqual([]);
    // A config without the folder does not recall it.
    second.close();
    const other = Store.open(data, { folders: [] });
    expect(other.memory.search("u", "peppers", 5)).toEqual([]);
    other.close();
  });

  test("a user's turns and the folders rank together", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    writeFileSync(join(notes, "bike.md"), "My bike is a red Dutch bike with a basket.");
    const store = Store.open(join(dir.path, "data"), { folders: [notes] });
    await store.folderIndex.start();
    store.conversations.commitTurn({
      userId: "u",
      sessionId: "s1",
      agent: "a",
      messages: [{ role: "user", content: "my bike is red" }],
      memoryText: "my bike is red",
      at: new Date(),
    });
    const sources = store.memory.search("u", "what colour is my bike", 5).map((h) => h.doc.source);
    expect(sources.sort()).toEqual(["file:bike.md", "session:s1"]);
    expect(store.memory.search("u", "bike", 5, "s1").map((h) => h.doc.source)).toEqual(["file:bike.md"]);
    store.close();
  });

  test("chunk splits long text at paragraphs", () => {
    const parts = chunk(`${"a".repeat(1000)}\n\n${"b".repeat(1000)}\n\nc`);
    expect(parts).toHaveLength(2);
    expect(parts[1]).toContain("c");
  });

  test("chunk never cuts a long paragraph inside a surrogate pair", () => {
    // Cut between its halves, an emoji was stored as two U+FFFD, one in each passage.
    const text = `${"x".repeat(1199)}😀${"y".repeat(3000)}`;
    const parts = chunk(text);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) expect(p.isWellFormed()).toBe(true);
    expect(parts.join("")).toBe(text);
  });
});
