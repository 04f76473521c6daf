import { describe, expect, spyOn, test } from "bun:test";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { exportToFile } from "../../src/store/export-file.ts";
import { sweepExportTemps } from "../../src/store/export-temps.ts";
import {
  OtherName,
  openToZeroChecked,
  zeroFile,
  zeroFileSync,
  zeroOpen,
  zeroOpenSync,
} from "../../src/store/scrub-file.ts";
import { type HeldFile, holdOpen } from "../fixtures/held-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A file of a conversation's words that is only unlinked keeps them in the disk's blocks: the
// core zeroes it on the disk first (docs/agent.md, The store). A descriptor the test holds
// (fixtures/held-file.ts) still reads the file's blocks after the core's name is gone, so it
// shows what the disk kept.
const WORDS = "my secret diagnosis, erased by the user\n".repeat(3_000);

describe("zeroFileSync / zeroFile", () => {
  for (const [name, zero] of [
    ["sync", (p: string) => zeroFileSync(p)],
    ["async", (p: string) => zeroFile(p)],
  ] as const) {
    test(`${name}: the file's bytes are zeros, its size kept`, async () => {
      using dir = tmpdir();
      const file = join(dir.path, "f");
      fs.writeFileSync(file, WORDS);
      using blocks = holdOpen(file);
      await zero(file);
      expect(blocks.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
    });

    test(`${name}: a link is refused and its target left as it was`, async () => {
      using dir = tmpdir();
      const target = join(dir.path, "target");
      fs.writeFileSync(target, WORDS);
      fs.symlinkSync(target, join(dir.path, "link"));
      await expect(Promise.resolve().then(() => zero(join(dir.path, "link")))).rejects.toThrow();
      expect(fs.readFileSync(target, "utf8")).toBe(WORDS);
    });

    // A `cp -al` backup of data_dir gives each file a second name: the blocks are the backup's too
    // and are not freed by the core's unlink. Zeroed, the user's copy was destroyed.
    test.skipIf(process.platform === "win32")(
      `${name}: a file with another name is left as it is, the user's copy`,
      async () => {
        using dir = tmpdir();
        const file = join(dir.path, "f");
        fs.writeFileSync(file, WORDS);
        fs.linkSync(file, join(dir.path, "backup"));
        await expect(Promise.resolve().then(() => zero(file))).rejects.toThrow(OtherName);
        expect(fs.readFileSync(join(dir.path, "backup"), "utf8")).toBe(WORDS);
      },
    );
  }

  for (const [name, zero] of [
    ["sync", (fd: number) => zeroOpenSync(fd)],
    ["async", (fd: number) => zeroOpen(fd)],
  ] as const) {
    test.skipIf(process.platform === "win32")(
      `${name}, through a descriptor once unlinked: a file with another name is left as it is`,
      async () => {
        using dir = tmpdir();
        const file = join(dir.path, "f");
        fs.writeFileSync(file, WORDS);
        fs.linkSync(file, join(dir.path, "backup"));
        const fd = fs.openSync(file, "r+");
        fs.unlinkSync(file);
        try {
          await expect(Promise.resolve().then(() => zero(fd))).rejects.toThrow(OtherName);
        } finally {
          if (name === "sync") fs.closeSync(fd);
        }
        expect(fs.readFileSync(join(dir.path, "backup"), "utf8")).toBe(WORDS);
      },
    );
  }

  // Unlinked with the zeros still in memory, the file system drops them and the blocks keep the words.
  test("sync: the zeros are synced before it returns", () => {
    using dir = tmpdir();
    const file = join(dir.path, "f");
    fs.writeFileSync(file, WORDS);
    const order: string[] = [];
    const write = spyOn(fs, "writeSync");
    const sync = spyOn(fs, "fsyncSync").mockImplementation(
      () => void order.push(`sync after ${write.mock.calls.length} writes`),
    );
    zeroFileSync(file);
    expect(order).toEqual([`sync after ${write.mock.calls.length} writes`]);
    expect(write.mock.calls.length).toBeGreaterThan(0);
    sync.mockRestore();
    write.mockRestore();
  });

  test.skipIf(process.platform === "win32")("a FIFO is neither waited on nor written", async () => {
    using dir = tmpdir();
    const fifo = join(dir.path, "fifo");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    zeroFileSync(fifo);
    await zeroFile(fifo);
    expect(fs.lstatSync(fifo).isFIFO()).toBe(true);
  });
});

// Windows has no O_NOFOLLOW (undefined there, so 0 in the flags): openToZero, which relied on it
// alone, opened a link or junction planted at a KV file's name in data_dir/kv, and the erase
// zeroed its target, a file of the user's own. Faked here by the flags without it.
describe("openToZeroChecked where the platform has no O_NOFOLLOW", () => {
  const noNofollow = fs.constants.O_RDWR | fs.constants.O_NONBLOCK;

  test("a link at the name is not opened, its target left as it was", () => {
    using dir = tmpdir();
    const target = join(dir.path, "target");
    fs.writeFileSync(target, WORDS);
    fs.symlinkSync(target, join(dir.path, "link"));
    expect(openToZeroChecked(join(dir.path, "link"), noNofollow)).toBeUndefined();
    expect(fs.readFileSync(target, "utf8")).toBe(WORDS);
  });

  test("a link put at the name between the look and the open is not kept open", () => {
    using dir = tmpdir();
    const target = join(dir.path, "target");
    const file = join(dir.path, "f");
    fs.writeFileSync(target, WORDS);
    fs.writeFileSync(file, WORDS);
    const real = fs.openSync;
    const open = spyOn(fs, "openSync").mockImplementation(((p: fs.PathLike, flags: number) => {
      fs.rmSync(file);
      fs.symlinkSync(target, file);
      return real(p, flags);
    }) as typeof fs.openSync);
    try {
      expect(openToZeroChecked(file, noNofollow)).toBeUndefined();
      expect(open).toHaveBeenCalledTimes(1);
    } finally {
      open.mockRestore();
    }
  });
});

// Two cores on one data folder each rename whole files into place (docs/agent.md, The store): one
// renamed onto the name between the open and the check after it was taken for a link (ELOOP),
// which a folder's erase passes over in silence, so the file then at the name went unzeroed. The
// name is opened again: the file at it is the one zeroed.
describe("a file renamed onto the name right after the open", () => {
  /** `f` in `dir`, with `fresh` renamed onto it by the first open of it (restored on dispose). */
  function renamedOnOpen(dir: string) {
    const file = join(dir, "f");
    const fresh = join(dir, "fresh");
    for (const p of [file, fresh]) fs.writeFileSync(p, WORDS);
    const freshIno = fs.statSync(fresh).ino;
    const real = fs.openSync;
    let done = false;
    const open = spyOn(fs, "openSync").mockImplementation(((p: fs.PathLike, flags: number) => {
      const fd = real(p, flags);
      if (p === file && !done) {
        done = true;
        fs.renameSync(fresh, file);
      }
      return fd;
    }) as typeof fs.openSync);
    return { file, fresh, freshIno, [Symbol.dispose]: () => open.mockRestore() };
  }

  test("zeroFileSync zeroes the file now at the name", () => {
    using dir = tmpdir();
    const swap = renamedOnOpen(dir.path);
    using kept = holdOpen(swap.fresh);
    try {
      zeroFileSync(swap.file);
    } finally {
      swap[Symbol.dispose]();
    }
    expect(kept.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
  });

  test("openToZeroChecked opens the file now at the name", () => {
    using dir = tmpdir();
    let fd: number | "changed" | undefined;
    let freshIno: number;
    {
      using swap = renamedOnOpen(dir.path);
      freshIno = swap.freshIno;
      fd = openToZeroChecked(swap.file);
    }
    expect(fd).toBeDefined();
    expect(fs.fstatSync(fd as number).ino).toBe(freshIno);
    fs.closeSync(fd as number);
  });
});

describe("an export's temp file", () => {
  test("a failed export's temp file is zeroed before it goes", async () => {
    using dir = tmpdir();
    const target = join(dir.path, "export.md");
    let blocks: HeldFile | undefined;
    async function* pieces() {
      yield WORDS;
    }
    const confirm = () => {
      const tmp = fs.readdirSync(dir.path).find((n) => n.startsWith(".export.md."));
      blocks = holdOpen(join(dir.path, tmp as string));
      throw new Error("the session was erased meanwhile");
    };
    await expect(exportToFile(target, pieces(), join(dir.path, "data"), confirm)).rejects.toThrow();
    expect(fs.readdirSync(dir.path).filter((n) => n.startsWith(".export.md."))).toEqual([]);
    using held = blocks as HeldFile;
    expect(held.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
  });

  // The temp file is zeroed by its name once closed: a file put at that name meanwhile (here a
  // second name of the user's own file) is not the export's, and its words are not the core's to zero.
  test.skipIf(process.platform === "win32")(
    "a file put at the temp's name meanwhile is left as it was",
    async () => {
      using dir = tmpdir();
      const target = join(dir.path, "export.md");
      const victim = join(dir.path, "notes.txt");
      fs.writeFileSync(victim, WORDS);
      async function* pieces() {
        yield "the export's own words";
      }
      const confirm = () => {
        const tmp = join(
          dir.path,
          fs.readdirSync(dir.path).find((n) => n.startsWith(".export.md.")) as string,
        );
        fs.renameSync(tmp, join(dir.path, "moved"));
        fs.linkSync(victim, tmp);
        throw new Error("the session was erased meanwhile");
      };
      await expect(exportToFile(target, pieces(), join(dir.path, "data"), confirm)).rejects.toThrow();
      expect(fs.readFileSync(victim, "utf8") === WORDS).toBe(true);
    },
  );

  // Another file renamed onto the temp's name before the session's erase failed the export (rare:
  // the name is fresh): the rename freed the temp's blocks, the words of the erased session in
  // them, and the zeroing by name found the other file and left it. The temp is zeroed through the
  // descriptor it was written by, still open until the rename, and the other file is left.
  test("a temp another file is renamed onto is zeroed through its own descriptor", async () => {
    using dir = tmpdir();
    const target = join(dir.path, "export.md");
    let blocks: HeldFile | undefined;
    let tmp = "";
    async function* pieces() {
      yield WORDS;
    }
    const confirm = () => {
      tmp = join(dir.path, fs.readdirSync(dir.path).find((n) => n.startsWith(".export.md.")) as string);
      blocks = holdOpen(tmp);
      fs.writeFileSync(`${tmp}.other`, "theirs");
      fs.renameSync(`${tmp}.other`, tmp);
      throw new Error("the session was erased meanwhile");
    };
    await expect(exportToFile(target, pieces(), join(dir.path, "data"), confirm)).rejects.toThrow();
    using held = blocks as HeldFile;
    expect(held.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
    expect(fs.readFileSync(tmp, "utf8")).toBe("theirs");
  });

  test("one a killed core left is zeroed by the next start's sweep before it goes", async () => {
    using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const notes = join(dataDir, "run", "exports");
    fs.mkdirSync(notes, { recursive: true });
    const tmp = join(dir.path, ".export.md.0123456789ab.tmp");
    fs.writeFileSync(tmp, WORDS);
    using blocks = holdOpen(tmp);
    fs.writeFileSync(join(notes, "999999999-aaaaaaaaaaaa.json"), JSON.stringify({ tmp }));
    await sweepExportTemps(dataDir);
    expect(fs.existsSync(tmp)).toBe(false);
    expect(blocks.zeroed()).toEqual({ size: Buffer.byteLength(WORDS), allZero: true });
  });
});

// On Windows a file unlinked while the core holds it open may still count its name (delete
// pending): refused as shared there, no KV file, export temp or replaced log would ever be zeroed.
test("a file with no name left is the core's alone, on Windows where an unlinked one may still count it", async () => {
  const { refuseShared, OtherName } = await import("../../src/store/scrub-file.ts");
  expect(() => refuseShared(1, 0, "win32")).not.toThrow();
  expect(() => refuseShared(2, 0, "win32")).toThrow(OtherName);
  expect(() => refuseShared(1, 0, "linux")).toThrow(OtherName);
  expect(() => refuseShared(1, 1, "win32")).not.toThrow();
  expect(() => refuseShared(2, 1, "win32")).toThrow(OtherName);
});
