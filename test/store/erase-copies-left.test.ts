import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { eraseFromCopies } from "../../src/store/erase-copies.ts";
import { logger } from "../../src/util/logger.ts";
import { holdOpen } from "../fixtures/held-file.ts";
import { thrownWhileSwapped } from "../fixtures/swap-in-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A database set aside after damage that cannot be scrubbed is zeroed and removed whole. A name
// another file was renamed onto under each of the three opens to zero it (another core setting a
// copy aside, a sync tool): the ECHANGED was swallowed and the file there last was unlinked
// UNZEROED (docs/agent.md, "Files of erased words are zeroed before they go"). Left instead, and
// the erase fails naming it before the live rows go, as a 0.1 file's does.
test("a set-aside copy swapped under each open is left and the erase fails naming it", async () => {
  using dir = tmpdir();
  const copy = join(dir.path, "local-ai.db.corrupt-2026-12-07");
  fs.writeFileSync(copy, "secret 0");
  const { swaps, thrown } = await thrownWhileSwapped(copy, () => eraseFromCopies(dir.path, "ann"));
  expect(swaps).toBe(3);
  expect(fs.readFileSync(copy, "utf8")).toBe("secret 3");
  expect(thrown).toMatchObject({
    code: "internal_error",
    data: { key: "app.data_dir", path: dir.path, file: copy, problem: "ECHANGED" },
  });
});

// Its removal refused (a data folder made read-only, EACCES; Windows' EPERM while a scanner holds
// it): the plain fs error crossed the store's thread without its path, and the host read a bare
// "internal error" with nothing to act on, the copy still there. It names the file and problem.
test("a set-aside copy whose removal is refused fails the erase naming it", () => {
  using dir = tmpdir();
  const copy = join(dir.path, "local-ai.db.corrupt-2026-12-07");
  fs.writeFileSync(copy, "secret");
  const realRm = fs.rmSync;
  const rm = spyOn(fs, "rmSync").mockImplementation(((p: fs.PathLike, o?: fs.RmOptions) => {
    if (p === copy)
      throw Object.assign(new Error(`EACCES: permission denied, unlink '${copy}'`), {
        code: "EACCES",
        path: copy,
      });
    return realRm(p, o);
  }) as typeof fs.rmSync);
  try {
    expect(() => eraseFromCopies(dir.path, "ann")).toThrow(
      expect.objectContaining({
        code: "internal_error",
        data: { key: "app.data_dir", path: dir.path, file: copy, problem: "EACCES" },
      }),
    );
  } finally {
    rm.mockRestore();
  }
});

// A copy (or its log) that cannot be opened to be zeroed (a read-only file, another user's, a
// hard link's second name): its removal unlinked it unzeroed with nothing said, though every other
// path that must remove a file unzeroed warns (scrub-tree.ts, atomic.ts), so the user never learnt
// that the erased rows' blocks were left on the disk. Faked on the open, as root opens any file;
// the copy is not a database (SQLite's open is its own, not node:fs's), so it goes whole.
test("a set-aside copy removed unzeroed is said, naming it", () => {
  using dir = tmpdir();
  const copy = join(dir.path, "local-ai.db.corrupt-2026-12-07");
  fs.writeFileSync(copy, "secret words, not a database");
  const realOpen = fs.openSync;
  const open = spyOn(fs, "openSync").mockImplementation(((p: fs.PathLike, ...rest: [never]) => {
    if (p === copy)
      throw Object.assign(new Error(`EACCES: permission denied, open '${copy}'`), {
        code: "EACCES",
        path: copy,
      });
    return realOpen(p, ...rest);
  }) as typeof fs.openSync);
  const warned: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((m: string) => void warned.push(m));
  try {
    expect(eraseFromCopies(dir.path, "ann")).toMatchObject([{ path: copy, outcome: "removed" }]);
  } finally {
    open.mockRestore();
    warn.mockRestore();
  }
  expect(fs.existsSync(copy)).toBe(false);
  const said = warned.filter((m) => m.includes("could not be zeroed"));
  expect(said).toEqual([expect.stringContaining(copy)]);
  expect(said.join("\n")).not.toContain("secret");
});

// SQLite's own open of a copy that is not a database (or is damaged) unlinks its rollback journal
// and write-ahead log before the removal whole could zero them: their blocks kept the erased rows
// though the copy "went whole". They are held open before the scrub and zeroed through that.
test("an unscrubbable copy's journal SQLite unlinks is zeroed all the same", () => {
  using dir = tmpdir();
  const copy = join(dir.path, "local-ai.db.corrupt-2026-12-07");
  const journal = `${copy}-journal`;
  fs.writeFileSync(copy, "not a database");
  fs.writeFileSync(journal, "secret words of an erased session");
  using blocks = holdOpen(journal);
  expect(eraseFromCopies(dir.path, "ann")).toMatchObject([{ path: copy, outcome: "removed" }]);
  expect(fs.existsSync(journal)).toBe(false);
  expect(blocks.zeroed()).toEqual({ size: 33, allZero: true });
});
