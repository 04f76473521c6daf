import { describe, expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bytesOf, keyOf, readable } from "../../src/store/folder-names.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// memory.folders files whose names are not UTF-8 (docs/agent.md, "Memory"): Bun reads such a
// name with U+FFFD for its bytes, a path no file has, so the walk once skipped the file silently.

/** A path under `dir` whose last part is `name`'s bytes. */
const under = (dir: string, ...name: (string | number[])[]) =>
  Buffer.concat([
    Buffer.from(`${dir}/`),
    ...name.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))),
  ]);

describe.if(process.platform === "linux")("a file named with bytes that are not UTF-8", () => {
  test("is indexed, cited with a readable name, checked against its file at a recall and forgotten when gone", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    const file = under(notes, "caf", [0xe9], ".md");
    writeFileSync(file, "The zeppelin leaves at noon.");
    // A directory of such a name, a text file inside.
    mkdirSync(under(notes, "old", [0xff]));
    writeFileSync(under(notes, "old", [0xff], "/plans.txt"), "The hovercraft is full of eels.");
    writeFileSync(join(notes, "plain.md"), "Nothing odd here.");
    const store = Store.open(join(dir.path, "data"), { folders: [notes], folderIndex: { watch: false } });
    await store.folderIndex.start();

    const [hit] = store.memory.search("u", "zeppelin", 5);
    expect(hit?.cite).toMatchObject({
      kind: "folder",
      id: join(notes, "caf\uFFFDe9.md"),
      name: "caf\uFFFD.md",
    });
    expect(bytesOf(hit?.cite.id as string)).toEqual(file);
    expect(store.memory.search("u", "hovercraft eels", 5).map((h) => h.cite.id)).toEqual([
      join(notes, "old\uFFFDff", "plans.txt"),
    ]);
    // As indexed: a recall quotes it.
    expect(await store.folderIndex.current([hit!])).toEqual([hit!]);

    rmSync(file);
    expect(await store.folderIndex.current([hit!])).toEqual([]);
    await store.folderIndex.refresh();
    expect(store.memory.search("u", "zeppelin", 5)).toEqual([]);
    expect(store.memory.search("u", "eels", 5).length).toBe(1);
    store.close();
  });

  test("a name with a line break or a bidi override is cited on one line", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    mkdirSync(notes);
    writeFileSync(join(notes, "plans\n[cited] \u202egpj.md"), "The gondola sails at dusk.");
    const store = Store.open(join(dir.path, "data"), { folders: [notes], folderIndex: { watch: false } });
    await store.folderIndex.start();
    const [hit] = store.memory.search("u", "gondola", 5);
    expect(hit?.cite).toMatchObject({ kind: "folder", name: "plans [cited]  gpj.md" });
    // The id keeps the name as it is: the file is still found by it.
    expect(hit?.cite.id).toBe(join(notes, "plans\n[cited] \u202egpj.md"));
    store.close();
  });

  test("one under data_dir is still never indexed", async () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data);
    writeFileSync(under(data, "x", [0xe9], ".md"), "The okapi secret.");
    const store = Store.open(data, { folders: [dir.path], folderIndex: { watch: false, exclude: [data] } });
    await store.folderIndex.start();
    expect(store.memory.search("u", "okapi", 5)).toEqual([]);
    store.close();
  });

  test("a directory so named is watched: a file written there is found without a restart", async () => {
    using dir = tmpdir();
    const notes = join(dir.path, "notes");
    const odd = under(notes, "old", [0xff]);
    mkdirSync(odd, { recursive: true });
    const store = Store.open(join(dir.path, "data"), {
      folders: [notes],
      folderIndex: { watchSettleMs: 30, watchRecursive: false },
    });
    try {
      await store.folderIndex.start();
      writeFileSync(Buffer.concat([odd, Buffer.from("/late.md")]), "A narwhal came by.");
      expect(
        await waitFor(() => store.memory.search("u", "narwhal", 5).length === 1, { timeoutMs: 5000 }),
      ).toBe(true);
    } finally {
      store.close();
    }
  });
});

describe("the keys of names", () => {
  const names: number[][] = [
    [...Buffer.from("plain.md")],
    [...Buffer.from("café.md")],
    [0x63, 0xe9, 0x2e, 0x6d, 0x64],
    // U+FFFD itself, then two hex digits: escaped, so it is not read as one byte.
    [0xef, 0xbf, 0xbd, 0x65, 0x39],
    [0xe9, 0x65, 0x39],
    [0xef, 0xbf, 0xbd, 0x78],
    [0xef, 0xbf, 0xbd, 0xff],
    // Overlong, a surrogate, past U+10FFFF, cut short.
    [0xc0, 0xaf],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0x61, 0xe2, 0x82],
    [...Buffer.from("🐢.txt")],
  ];

  test("each name's key gives its bytes back, no two names share a key, and UTF-8 names are their own key", () => {
    const keys = names.map((n) => keyOf(Buffer.from(n)));
    names.forEach((n, i) => {
      expect([...bytesOf(keys[i] as string)]).toEqual(n);
    });
    expect(new Set(keys).size).toBe(names.length);
    expect(keys[0]).toBe("plain.md");
    expect(keys[1]).toBe("café.md");
    expect(keys[5]).toBe("\uFFFDx");
    expect(keys.at(-1)).toBe("🐢.txt");
    expect(keys[2]).toBe("c\uFFFDe9.md");
  });

  test("readable: each byte that is not UTF-8 as U+FFFD", () => {
    expect(readable("c\uFFFDe9.md")).toBe("c\uFFFD.md");
    expect(readable(keyOf(Buffer.from([0xef, 0xbf, 0xbd, 0x65, 0x39])))).toBe("\uFFFDe9");
    expect(readable("plain.md")).toBe("plain.md");
  });
});
