import { expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { DB_FILE, moveDatabaseAside, openStore } from "../../../src/store/db/open.ts";
import { pendingResets, resetMessage, resetNote, writeResetNote } from "../../../src/store/db/reset-note.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// The migration's thread set a damaged file aside and was stopped by shutdown before the host
// heard (before the fresh file was made, or before a chat's store_reset warning): the next start
// found a fresh (or no) file and never told the host its conversations were moved aside.
test("a reset not yet told survives the core's stop: the next open tells it, until a chat has", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  writeFileSync(path, Buffer.alloc(4096, 7));
  const first = openStore(dir.path, { withoutFts: true });
  first.db.close();
  const aside = first.resetFrom as string;
  expect(existsSync(aside)).toBe(true);
  // Stopped between the move and the fresh file: no file at the path at the next start.
  rmSync(path);
  for (const name of ["-wal", "-shm"]) rmSync(path + name, { force: true });
  const next = Store.open(dir.path, { withoutFts: true, chunkThread: false });
  expect(next.takeResets().at(-1)).toEqual({ aside, problem: first.resetProblem as string });
  next.close();
  // Told once: the start after that says nothing.
  expect(existsSync(resetNote(path))).toBe(false);
  const after = openStore(dir.path, { withoutFts: true });
  expect(after.resetFrom).toBeUndefined();
  after.db.close();
});

test("a note whose file set aside is not there (a core killed before the move) tells nothing and goes", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  writeFileSync(resetNote(path), JSON.stringify({ aside: `${path}.corrupt-gone`, problem: "x" }));
  const opened = openStore(dir.path, { withoutFts: true });
  opened.db.close();
  expect(opened.resetFrom).toBeUndefined();
  expect(existsSync(resetNote(path))).toBe(false);
});

// A note is only ever the core's own, naming a copy it set aside beside the database. One that
// names any other file (a data_dir copied from another place, or a note planted there) had the
// chat's store_reset warning tell the host that file's path as where its conversations were kept.
test("a note naming a file that is not a copy set aside beside the database tells nothing and goes", () => {
  using dir = tmpdir();
  using elsewhere = tmpdir();
  const path = join(dir.path, DB_FILE);
  const other = join(elsewhere.path, "tax-return-2026.pdf");
  writeFileSync(other, "private");
  for (const aside of [other, join(elsewhere.path, `${DB_FILE}.corrupt-x`), join(dir.path, "notes.txt")]) {
    writeFileSync(aside, "x");
    writeFileSync(resetNote(path), JSON.stringify({ aside, problem: "x" }));
    const opened = openStore(dir.path, { withoutFts: true });
    opened.db.close();
    expect(opened.resetFrom).toBeUndefined();
    expect(existsSync(resetNote(path))).toBe(false);
  }
});

// A damaged copy fails its quick_check, so a users.delete removes it whole (erase-copies.ts): the
// next chat's store_reset warning still named it as where the conversations were kept, the host
// telling its user that erased data was there to find.
test("a reset whose copy an erase removed since is told without naming a kept file", () => {
  using dir = tmpdir();
  writeFileSync(join(dir.path, DB_FILE), Buffer.alloc(4096, 7));
  const store = Store.open(dir.path, { withoutFts: true, chunkThread: false });
  const aside = readdirSync(dir.path).find((n) => n.includes(".corrupt-")) as string;
  rmSync(join(dir.path, aside));
  const told = store.takeResets().at(-1);
  store.close();
  expect(told?.removed).toBe(true);
  expect(resetMessage(told as NonNullable<typeof told>)).not.toContain(aside);
});

// A core set a damaged file aside and stopped before a chat told the host; at the next start the
// fresh file was damaged too and set aside again: the second note overwrote the first, so the
// host never heard that its first copy (the one with the conversations) was moved aside.
test("a second reset before the first was told: both are told, oldest first, then neither again", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  writeFileSync(path, Buffer.alloc(4096, 7));
  let at = Date.parse("2026-12-01T00:00:00Z");
  const now = () => {
    at += 1000;
    return new Date(at);
  };
  const first = openStore(dir.path, { withoutFts: true, now });
  first.db.close();
  for (const name of ["", "-wal", "-shm"]) rmSync(path + name, { force: true });
  writeFileSync(path, Buffer.alloc(4096, 9));
  const store = Store.open(dir.path, { withoutFts: true, chunkThread: false, now });
  const told = store.takeResets();
  expect(told.map((r) => r.aside)).toEqual([first.resetFrom as string, expect.stringContaining(".corrupt-")]);
  expect(told[1]?.aside).not.toBe(first.resetFrom);
  expect(store.takeResets()).toEqual([]);
  store.close();
  expect(existsSync(resetNote(path))).toBe(false);
});

// The data_dir spelled otherwise at the next start (through a link, a trailing slash): the
// note's copy, in the same folder, was judged another folder's and dropped, never told.
test("a note read through another spelling of the same folder is told, named as spelled now", () => {
  using dir = tmpdir();
  using links = tmpdir();
  const path = join(dir.path, DB_FILE);
  writeFileSync(path, Buffer.alloc(4096, 7));
  const first = openStore(dir.path, { withoutFts: true });
  first.db.close();
  const name = basename(first.resetFrom as string);
  const link = join(links.path, "data");
  symlinkSync(dir.path, link);
  for (const spelled of [link, `${dir.path}/`]) {
    writeFileSync(resetNote(path), JSON.stringify({ aside: first.resetFrom, problem: "x" }));
    const store = Store.open(spelled, { withoutFts: true, chunkThread: false });
    expect(store.takeResets()).toEqual([{ aside: join(spelled, name), problem: "x" }]);
    store.close();
  }
});

// A damaged file set aside with its -wal and -shm but not its rollback journal: a journal SQLite
// could not roll back stayed at the live name, beside the fresh database (a hot journal there is
// played into it), and out of reach of users.delete, which zeroes a copy's journal with the copy
// (erase-copies.ts): SQLite's later unlink left the old pages' text unzeroed on the disk.
test("a damaged file is set aside with its rollback journal, none left at the live name", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  writeFileSync(path, Buffer.alloc(4096, 7));
  writeFileSync(`${path}-journal`, Buffer.alloc(4096, 3));
  const aside = `${path}.corrupt-x`;
  moveDatabaseAside(path, aside);
  expect(readdirSync(dir.path).sort()).toEqual([`${DB_FILE}.corrupt-x`, `${DB_FILE}.corrupt-x-journal`]);
});

// A file damaged at every start (a failing disk) made a ninth reset before a chat told any: the
// note kept the last eight, dropping the first, the only copy holding the user's conversations
// (the later ones are fresh files), and the host never heard where they went.
test("more resets than a note keeps: the first, the copy with the conversations, is still told", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  const copies = Array.from({ length: 10 }, (_, i) => `${path}.corrupt-2026-12-0${i}`);
  for (const aside of copies) {
    writeFileSync(aside, "x");
    writeResetNote(path, { aside, problem: "damaged" });
  }
  const told = pendingResets(path).map((r) => r.aside);
  expect(told.length).toBeLessThanOrEqual(8);
  expect(told[0]).toBe(copies[0]);
  expect(told.at(-1)).toBe(copies[9]);
});
