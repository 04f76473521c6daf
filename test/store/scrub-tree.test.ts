import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { removeZeroedSync } from "../../src/store/scrub-tree.ts";
import { type HeldFile, holdOpen } from "../fixtures/held-file.ts";
import { thrownWhileSwapped } from "../fixtures/swap-in-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A 0.1 folder an erase removes had each file zeroed, then the whole folder removed by one
// recursive rmSync: a file put in it between (the 0.1 app still writing there) was unlinked
// unzeroed, its words left in the disk's blocks (docs/agent.md, "Files of erased words are
// zeroed before they go"). The file is put there at the first zeroing's sync; a descriptor the
// test holds (fixtures/held-file.ts) reads what the disk kept.
const WORDS = "my secret, erased by the user\n".repeat(500);

test("a file put in the folder while it is zeroed is zeroed too, never unlinked unzeroed", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "session");
  fs.mkdirSync(join(tree, "sub"), { recursive: true });
  fs.writeFileSync(join(tree, "history.json"), WORDS);
  fs.writeFileSync(join(tree, "sub", "checkpoint.json"), WORDS);
  const held: HeldFile[] = [
    holdOpen(join(tree, "history.json")),
    holdOpen(join(tree, "sub", "checkpoint.json")),
  ];
  const realSync = fs.fsyncSync;
  let put = false;
  const sync = spyOn(fs, "fsyncSync").mockImplementation((fd: number) => {
    realSync(fd);
    if (put) return;
    put = true;
    const late = join(tree, "late.json");
    fs.writeFileSync(late, WORDS);
    held.push(holdOpen(late));
  });
  try {
    removeZeroedSync(tree);
  } finally {
    sync.mockRestore();
  }
  expect(put).toBe(true);
  expect(fs.existsSync(tree)).toBe(false);
  expect(held.map((h) => h.zeroed())).toEqual(
    held.map(() => ({ size: Buffer.byteLength(WORDS), allZero: true })),
  );
  for (const h of held) h[Symbol.dispose]();
});

test("a file and a link given alone are removed, the link's target left as it was", () => {
  using dir = tmpdir();
  const file = join(dir.path, "memory.json");
  const target = join(dir.path, "target");
  const link = join(dir.path, "link");
  fs.writeFileSync(file, WORDS);
  fs.writeFileSync(target, WORDS);
  fs.symlinkSync(target, link);
  using blocks = holdOpen(file);
  removeZeroedSync(file);
  removeZeroedSync(link);
  removeZeroedSync(join(dir.path, "gone"));
  expect(blocks.zeroed().allZero).toBe(true);
  expect([fs.existsSync(file), fs.existsSync(link), fs.readFileSync(target, "utf8")]).toEqual([
    false,
    false,
    WORDS,
  ]);
});

// A link planted in data_dir where a 0.1 folder belongs: listed through, the folder it points to
// (anyone's) had every file zeroed, though only the link was removed.
test("a link to a folder is removed, never listed through", () => {
  using dir = tmpdir();
  const target = join(dir.path, "someone-else");
  const link = join(dir.path, "session");
  fs.mkdirSync(target);
  fs.writeFileSync(join(target, "theirs.txt"), WORDS);
  fs.symlinkSync(target, link);
  removeZeroedSync(link);
  expect([fs.existsSync(link), fs.readFileSync(join(target, "theirs.txt"), "utf8")]).toEqual([false, WORDS]);
});

// A file of the tree whose name is swapped under each of the three opens to zero it (the 0.1 app
// or another core renaming onto it): zeroFileSync threw ECHANGED, taken for "cannot be opened",
// and the file renamed there last was unlinked UNZEROED (docs/agent.md, "Files of erased words
// are zeroed before they go"). Left instead, and the removal throws, so the erase fails.
test("a file swapped under each open is left and the removal fails, never unlinked unzeroed", async () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  const file = join(tree, "history.json");
  fs.writeFileSync(file, "secret 0");
  const { swaps, thrown } = await thrownWhileSwapped(file, () => removeZeroedSync(tree));
  expect(swaps).toBe(3);
  expect(fs.readFileSync(file, "utf8")).toBe("secret 3");
  expect((thrown as { code?: string })?.code).toBe("ECHANGED");
});

// A folder whose listing is refused (EACCES: another user's, a mode without read; EMFILE; a file
// swapped in, ENOTDIR) was only warned of and removed by one recursive rmSync: whatever that
// removal reached went unzeroed, its words in the disk's blocks. The erase fails instead, naming it.
test("a folder that cannot be listed is left and the removal fails naming it, nothing unlinked unzeroed", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  fs.writeFileSync(join(tree, "history.json"), WORDS);
  const realReaddir = fs.readdirSync;
  const list = spyOn(fs, "readdirSync").mockImplementation(((p: fs.PathLike, o?: unknown) => {
    if (p === tree)
      throw Object.assign(new Error(`EACCES: permission denied, scandir '${tree}'`), {
        code: "EACCES",
        path: tree,
      });
    return realReaddir(p, o as never);
  }) as typeof fs.readdirSync);
  const thrown = thrownBy(tree, () => list.mockRestore());
  expect(thrown).toMatchObject({ code: "EACCES", path: tree });
  expect(fs.readFileSync(join(tree, "history.json"), "utf8")).toBe(WORDS);
});

// A file whose name's bytes are not UTF-8 (0.1 on Linux took names as they came) was listed with
// U+FFFD in their place, a name no call finds: its zeroing and unlink met ENOENT, passed over, and
// the folder was left "as files kept being put in it" with the erase answered done, its words
// readable. The erase fails instead, naming the folder (EILSEQ).
test("a file named in bytes not UTF-8 fails the removal naming its folder, never a silent success", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  const bytesName = Buffer.concat([
    Buffer.from(`${tree}/notes-`),
    Buffer.from([0xff, 0xfe]),
    Buffer.from(".json"),
  ]);
  fs.writeFileSync(bytesName, WORDS);
  expect(() => removeZeroedSync(tree)).toThrow(expect.objectContaining({ code: "EILSEQ", path: tree }));
  expect(fs.readFileSync(bytesName, "utf8")).toBe(WORDS);
});

test("a name with a real U+FFFD in UTF-8 is zeroed and removed as any other", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  fs.writeFileSync(join(tree, "notes-\uFFFD.json"), WORDS);
  removeZeroedSync(tree);
  expect(fs.existsSync(tree)).toBe(false);
});

// The 0.1 app writing on in a session's folder while it is erased: a file put in it at every
// pass's zeroing. After the second pass the folder was left, said only in the log, and the erase
// answered done while the last newcomer kept its words on disk. It fails instead, naming the
// folder (`ENOTEMPTY`), as a folder that cannot be listed and a name not in UTF-8 do.
test("a folder files keep being put in fails the removal naming it, never a silent success", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  fs.writeFileSync(join(tree, "history.json"), WORDS);
  const realSync = fs.fsyncSync;
  let puts = 0;
  const sync = spyOn(fs, "fsyncSync").mockImplementation((fd: number) => {
    realSync(fd);
    puts++;
    fs.writeFileSync(join(tree, `late-${puts}.json`), WORDS);
  });
  const thrown = thrownBy(tree, () => sync.mockRestore());
  expect(thrown).toMatchObject({ code: "ENOTEMPTY", path: tree });
  expect(fs.readdirSync(tree).length).toBeGreaterThan(0);
});

/** What `removeZeroedSync(tree)` threw (undefined: nothing), `restore` run whatever happened. */
function thrownBy(tree: string, restore: () => void): unknown {
  try {
    removeZeroedSync(tree);
    return undefined;
  } catch (err) {
    return err;
  } finally {
    restore();
  }
}

// A folder another program removed between the core's refused rmdir (ENOTEMPTY: it was still
// writing) and the next pass's listing: the listing's ENOENT failed the erase, though nothing of
// the folder was left, and the host was told to send the delete again for nothing.
test("a folder gone between a pass and the next is erased, not a failure", () => {
  using dir = tmpdir();
  const tree = join(dir.path, "trip");
  fs.mkdirSync(tree);
  fs.writeFileSync(join(tree, "history.json"), "secret");
  const realRmdir = fs.rmdirSync;
  const rmdir = spyOn(fs, "rmdirSync").mockImplementation(((p: fs.PathLike) => {
    if (p !== tree) return realRmdir(p);
    fs.rmSync(tree, { recursive: true });
    throw Object.assign(new Error(`ENOTEMPTY: directory not empty, rmdir '${tree}'`), { code: "ENOTEMPTY" });
  }) as typeof fs.rmdirSync);
  try {
    expect(() => removeZeroedSync(tree)).not.toThrow();
  } finally {
    rmdir.mockRestore();
  }
  expect(fs.existsSync(tree)).toBe(false);
});
