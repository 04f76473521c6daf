import { expect, test } from "bun:test";
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readFolderFile } from "../../src/store/folder-walk.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A memory folder's links are not followed (docs/agent.md "Memory"): its passages are every
// user's, so a link to a file elsewhere (another user's saved conversation under data_dir, a
// key) must not bring that file in. The walk skipped links, but the read followed one: a file
// swapped for a link after the walk listed it was read through the link and indexed.

test.skipIf(process.platform === "win32")(
  "a file swapped for a link between the walk and its read is not read through the link",
  async () => {
    using dir = tmpdir();
    const folder = join(dir.path, "notes");
    mkdirSync(folder);
    const note = join(folder, "note.md");
    writeFileSync(note, "harmless words ".repeat(20));
    const secret = join(dir.path, "secret.json");
    writeFileSync(secret, '{"key": "zebracorn"}');
    const data = join(dir.path, "data");
    let swapped = false;
    const store = Store.open(data, {
      folders: [folder],
      folderIndex: {
        watch: false,
        read: (path, maxBytes) => {
          if (!swapped) {
            swapped = true;
            rmSync(note);
            symlinkSync(secret, note);
          }
          return readFolderFile(path, maxBytes);
        },
      },
    });
    await store.folderIndex.start();
    expect(swapped).toBe(true);
    expect(store.memory.search("u", "zebracorn", 5)).toEqual([]);
    store.close();
    expect(filesHolding(data, "zebracorn")).toEqual([]);
  },
);
