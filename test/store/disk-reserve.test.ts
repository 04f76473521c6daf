import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { DiskReserve } from "../../src/store/disk-reserve.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The reserve's room is for erasing on a full disk (docs/agent.md, The store): an erase and an
// unfinished add's discard (store.ts discardAdd) may both go in steps at once, and the first to
// finish must not put the reserve back while the other still needs the room.
const full = () => Object.assign(new Error("database or disk is full"), { data: { problem: "SQLITE_FULL" } });

describe("DiskReserve.orInSteps", () => {
  test("two erases in steps at once: the reserve comes back after the last", async () => {
    using dir = tmpdir();
    const reserve = new DiskReserve(join(dir.path, "reserve"), 4096);
    expect(reserve.ensure()).toBe(true);
    let finishSecond = () => {};
    const secondRuns = new Promise<void>((r) => {
      finishSecond = r;
    });
    const inSteps = (wait: Promise<void>) =>
      reserve.orInSteps(async (steps) => {
        if (!steps) throw full();
        await wait;
        return "erased";
      });
    const second = inSteps(secondRuns);
    expect(await inSteps(Promise.resolve())).toBe("erased");
    expect(existsSync(reserve.path)).toBe(false);
    finishSecond();
    expect(await second).toBe("erased");
    expect(existsSync(reserve.path)).toBe(true);
  });

  test("an erase that fits is not in steps; another failure passes through", async () => {
    using dir = tmpdir();
    const reserve = new DiskReserve(join(dir.path, "reserve"), 4096);
    reserve.ensure();
    expect(await reserve.orInSteps(async (steps) => steps)).toBe(false);
    const other = new Error("locked");
    let thrown: unknown;
    try {
      await reserve.orInSteps(async () => {
        throw other;
      });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBe(other);
    expect(existsSync(reserve.path)).toBe(true);
  });
});

// A real small file system (a tmpfs: root on Linux), else skipped and said so.
const disk = smallDisk("2m", "disk reserve on a nearly full disk");
afterAll(() => disk.dispose());

describe("DiskReserve.ensure on a disk with room for part of it", () => {
  test.skipIf(!disk.mounted)("not taken as whole: false and no file, never a shorter reserve", () => {
    // Room for 48 KiB of a 64 KiB reserve written in one piece: the disk takes what fits.
    fillDisk(join(disk.path, "filler"), 48 * 1024);
    const reserve = new DiskReserve(join(disk.path, "reserve"), 64 * 1024);
    const whole = reserve.ensure();
    const size = statSync(reserve.path, { throwIfNoEntry: false })?.size;
    expect({ whole, size }).toEqual({ whole: false, size: undefined });
  });
});

// A data_dir others may write (doctor warns of it) can hold a link planted at the reserve's name.
describe.skipIf(process.platform === "win32")("DiskReserve.ensure over a link", () => {
  test("a link at the reserve's name is not written through, nor taken for the reserve", () => {
    using dir = tmpdir();
    const precious = join(dir.path, "precious.txt");
    writeFileSync(precious, "the user's own file");
    const reserve = new DiskReserve(join(dir.path, "local-ai.db.reserve"), 4096);
    symlinkSync(precious, reserve.path);
    expect(reserve.ensure()).toBe(false);
    expect(readFileSync(precious, "utf8")).toBe("the user's own file");
    // The link is gone (the name is the core's), so the next start writes a reserve of its own.
    expect(reserve.ensure()).toBe(true);
    expect(lstatSync(reserve.path).isFile()).toBe(true);
    expect(readFileSync(precious, "utf8")).toBe("the user's own file");
  });

  test("a link to a big file is not taken for a reserve already there", () => {
    using dir = tmpdir();
    const big = join(dir.path, "big.bin");
    writeFileSync(big, Buffer.alloc(8192, 7));
    const reserve = new DiskReserve(join(dir.path, "local-ai.db.reserve"), 4096);
    symlinkSync(big, reserve.path);
    reserve.ensure();
    reserve.ensure();
    expect(lstatSync(reserve.path).isFile()).toBe(true);
    expect(readFileSync(big)).toEqual(Buffer.alloc(8192, 7));
  });
});

// Other things at the reserve's name: the core's open must neither stop on them nor write into them.
describe.skipIf(process.platform === "win32")("DiskReserve.ensure over what is not a file", () => {
  test("a FIFO with no reader does not stop the open, and is replaced by a reserve", () => {
    using dir = tmpdir();
    const path = join(dir.path, "local-ai.db.reserve");
    expect(spawnSync("mkfifo", [path]).status).toBe(0);
    // In a child: an open that blocks on the FIFO would block this test's own thread for good.
    // The limit only ends a child that hangs; it times nothing.
    const code = `import { DiskReserve } from ${JSON.stringify(join(import.meta.dir, "../../src/store/disk-reserve.ts"))};
      console.log(JSON.stringify([new DiskReserve(${JSON.stringify(path)}, 4096).ensure(), new DiskReserve(${JSON.stringify(path)}, 4096).ensure()]));`;
    const child = spawnSync(process.execPath, ["-e", code], { timeout: 20_000, encoding: "utf8" });
    expect({ signal: child.signal, out: child.stdout.trim() }).toEqual({ signal: null, out: "[false,true]" });
    expect(lstatSync(path).isFile()).toBe(true);
  });

  test("a folder does not fail the open, and is left as it is", () => {
    using dir = tmpdir();
    const reserve = new DiskReserve(join(dir.path, "local-ai.db.reserve"), 4096);
    mkdirSync(reserve.path);
    writeFileSync(join(reserve.path, "kept.txt"), "the user's own file");
    expect(reserve.ensure()).toBe(false);
    expect(readFileSync(join(reserve.path, "kept.txt"), "utf8")).toBe("the user's own file");
    reserve.release();
  });
});
