import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { stageFileAtomic } from "../../src/store/atomic.ts";
import { logger } from "../../src/util/logger.ts";
import { holdOpen } from "../fixtures/held-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A staged write's temp file dropped (a discard, a refused rename): its unlink refused (Windows'
// EPERM/EBUSY while a scanner holds it, a folder made read-only) left the file at its name with
// the words it was given, and zeroOpenSync, told it had no name left, refused it as another's
// (docs/agent.md, "Files of erased words are zeroed before they go"). The refusal is faked on
// the unlink, as root removes any file.

const WORDS = "my secret diagnosis, erased by the user\n".repeat(50);

test("a dropped temp file whose unlink is refused is zeroed at its name, said", () => {
  using dir = tmpdir();
  const target = join(dir.path, "turns.json");
  const staged = stageFileAtomic(target, WORDS, ".aaaaaaaaaaaa.tmp");
  const tmp = join(dir.path, ".aaaaaaaaaaaa.tmp");
  const realRm = fs.rmSync;
  const rm = spyOn(fs, "rmSync").mockImplementation(((p: fs.PathLike, o?: fs.RmOptions) => {
    if (p === tmp)
      throw Object.assign(new Error(`EPERM: operation not permitted, unlink '${tmp}'`), { code: "EPERM" });
    return realRm(p, o);
  }) as typeof fs.rmSync);
  const warned: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((m: string) => void warned.push(m));
  try {
    staged.discard();
  } finally {
    rm.mockRestore();
    warn.mockRestore();
  }
  const left = fs.readFileSync(tmp);
  expect({ size: left.length, allZero: left.every((b) => b === 0) }).toEqual({
    size: Buffer.byteLength(WORDS),
    allZero: true,
  });
  expect(warned.join("\n")).toContain("could not be removed");
  expect(fs.existsSync(target)).toBe(false);
});

// Another file renamed onto the temp's name before the drop (another core's or program's write
// through the same name; rare, the name is fresh): the rename freed the temp's blocks with the
// words in them, and the drop, opening by name, zeroed and removed the other file instead. The
// temp is zeroed through the descriptor it was written by; the file at the name is not the core's.
test("a temp file another is renamed onto is zeroed through its own descriptor, the other left", () => {
  using dir = tmpdir();
  const target = join(dir.path, "turns.json");
  const tmp = join(dir.path, ".bbbbbbbbbbbb.tmp");
  const staged = stageFileAtomic(target, WORDS, ".bbbbbbbbbbbb.tmp");
  using ours = holdOpen(tmp);
  fs.writeFileSync(`${tmp}.other`, "theirs");
  fs.renameSync(`${tmp}.other`, tmp);
  staged.discard();
  expect(ours.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
  expect([fs.readFileSync(tmp, "utf8"), fs.existsSync(target)]).toEqual(["theirs", false]);
});

// A write cut short whose close fails too (a network disk reports the lost write again at close,
// EIO): the caller's drop of the temp (KvDisk's, zeroing a sidecar quoting the user's words) was
// skipped, the temp left at its name, and the close's error thrown in place of the write's (a full
// disk's ENOSPC, which the callers tell apart). The drop runs and the write's error is thrown.
test("a cut-short write whose close fails still drops its temp and throws the write's error", () => {
  using dir = tmpdir();
  const target = join(dir.path, "a.json");
  const tmp = join(dir.path, ".cccccccccccc.tmp");
  const dropped: string[] = [];
  const realClose = fs.closeSync;
  const write = spyOn(fs, "writeSync").mockImplementation(() => {
    throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
  });
  const close = spyOn(fs, "closeSync").mockImplementation((fd: number) => {
    realClose(fd);
    throw Object.assign(new Error("EIO: i/o error, close"), { code: "EIO" });
  });
  let thrown: unknown;
  try {
    stageFileAtomic(target, WORDS, ".cccccccccccc.tmp", (t) => void dropped.push(t));
  } catch (err) {
    thrown = err;
  } finally {
    write.mockRestore();
    close.mockRestore();
  }
  expect([(thrown as { code?: string })?.code, dropped]).toEqual(["ENOSPC", [tmp]]);
});
