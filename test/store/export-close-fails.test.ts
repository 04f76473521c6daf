import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { exportToFile } from "../../src/store/export-file.ts";
import { type HeldFile, holdOpen } from "../fixtures/held-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const WORDS = "my secret diagnosis, erased by the user\n".repeat(100);

// An export's temp file whose close fails (EIO from a network or USB disk, EINTR): Linux has
// released the descriptor all the same, and its number is the next open's (the store's thread,
// SQLite, shares the table). The export kept the number as the temp's: its drop found another
// file through it (the temp left at its name, unzeroed, the note that a next start sweeps it
// cleared) and closed that other file's descriptor under its owner. The temp is dropped by name.
test("an export whose temp's close fails drops the temp and no other descriptor", async () => {
  using dir = tmpdir();
  const target = join(dir.path, "export.md");
  const other = join(dir.path, "other.txt");
  fs.writeFileSync(other, "someone else's file");
  let tmp = "";
  let blocks: HeldFile | undefined;
  let otherFd: number | undefined;
  async function* pieces() {
    yield WORDS;
  }
  const confirm = () => {
    tmp = join(dir.path, fs.readdirSync(dir.path).find((n) => n.startsWith(".export.md.")) as string);
    blocks = holdOpen(tmp);
  };
  const realClose = fs.closeSync;
  const close = spyOn(fs, "closeSync").mockImplementation((fd: number) => {
    const isTemp = tmp !== "" && otherFd === undefined && fs.fstatSync(fd).ino === fs.statSync(tmp).ino;
    realClose(fd);
    if (!isTemp) return;
    // The number taken by the next open, as the lowest free one is.
    otherFd = fs.openSync(other, "r");
    throw Object.assign(new Error("EIO: i/o error, close"), { code: "EIO" });
  });
  let err: unknown;
  try {
    err = await exportToFile(target, pieces(), join(dir.path, "data"), confirm).catch((e) => e);
  } finally {
    close.mockRestore();
  }
  expect(err).toMatchObject({ code: "invalid_request", data: { problem: "EIO" } });
  using held = blocks as HeldFile;
  expect(held.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
  expect(fs.existsSync(tmp)).toBe(false);
  // The other file's descriptor still its own, its bytes untouched.
  expect(fs.fstatSync(otherFd as number).ino).toBe(fs.statSync(other).ino);
  fs.closeSync(otherFd as number);
  expect(fs.readFileSync(other, "utf8")).toBe("someone else's file");
  expect(fs.existsSync(target)).toBe(false);
});
