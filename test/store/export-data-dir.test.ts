import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportToFile } from "../../src/store/export-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

async function* pieces(): AsyncIterable<string> {
  yield "hello";
}

/** What Windows' native realpath says of a folder on a drive outside the Mount Manager. */
function eisdir(path: string): Error {
  return Object.assign(new Error(`EISDIR: illegal operation on a directory, realpath '${path}'`), {
    code: "EISDIR",
  });
}

// Windows drives that bypass the Mount Manager (ImDisk RAM disks, WinFsp mounts such as rclone's
// or sshfs-win's) fail GetFinalPathNameByHandle, hence realpathSync.native, with EISDIR on any
// folder: an export there (or a data_dir there) must still be written, or still be refused.
describe("sessions.export's data_dir check where the native realpath cannot answer", () => {
  let spy: ReturnType<typeof spyOn> | undefined;
  afterEach(() => spy?.mockRestore());

  function nativeFailsUnder(root: string): void {
    const real = realpathSync.native;
    spy = spyOn(realpathSync, "native").mockImplementation(((p: string) => {
      if (String(p).startsWith(root)) throw eisdir(String(p));
      return real(p);
    }) as typeof realpathSync.native);
  }

  test("an export to such a drive is written, not refused as path_unwritable EISDIR", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const ramDisk = join(dir.path, "ram");
    mkdirSync(dataDir);
    mkdirSync(ramDisk);
    nativeFailsUnder(ramDisk);
    const target = join(ramDisk, "export.md");
    expect(await exportToFile(target, pieces(), dataDir)).toBe(5);
    expect(readFileSync(target, "utf8")).toBe("hello");
  });

  test("a data_dir on such a drive still has a path inside it refused", async () => {
    await using dir = tmpdir();
    const ramDisk = join(dir.path, "ram");
    const dataDir = join(ramDisk, "data");
    mkdirSync(dataDir, { recursive: true });
    nativeFailsUnder(ramDisk);
    const err = await exportToFile(join(dataDir, "local-ai.db"), pieces(), dataDir).catch((e) => e);
    expect(err.data).toMatchObject({ field: "path", reason: "path_unwritable", problem: "EPERM" });
  });

  test("a folder that is not there is still ENOENT", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    mkdirSync(dataDir);
    nativeFailsUnder(dir.path);
    const err = await exportToFile(join(dir.path, "nowhere", "x.md"), pieces(), dataDir).catch((e) => e);
    expect(err.data).toMatchObject({ field: "path", reason: "path_unwritable", problem: "ENOENT" });
  });

  test("a link to data_dir on such a drive, compared as written, is still found to be data_dir", async () => {
    await using dir = tmpdir();
    const ramDisk = join(dir.path, "ram");
    const dataDir = join(ramDisk, "data");
    mkdirSync(dataDir, { recursive: true });
    symlinkSync(dataDir, join(ramDisk, "other-name"));
    nativeFailsUnder(ramDisk);
    const err = await exportToFile(join(ramDisk, "other-name", "local-ai.db"), pieces(), dataDir).catch(
      (e) => e,
    );
    expect(err.data).toMatchObject({ field: "path", reason: "path_unwritable", problem: "EPERM" });
  });
});

/** Whether this test process may bind-mount (root on Linux, mount allowed in its namespace). */
function canBindMount(from: string, to: string): boolean {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return false;
  return Bun.spawnSync(["mount", "--bind", from, to], { stderr: "ignore" }).exitCode === 0;
}

describe("sessions.export's data_dir check across two paths to one folder", () => {
  // A bind mount stands for every such pair realpath keeps apart (a case-insensitive disk on
  // Linux, WSL's /mnt/c): the rename through the second path would replace the live database.
  test("an export through a bind mount of data_dir's folder is refused", async () => {
    await using dir = tmpdir();
    const home = join(dir.path, "home");
    const dataDir = join(home, "data");
    const mirror = join(dir.path, "mirror");
    mkdirSync(dataDir, { recursive: true });
    mkdirSync(mirror);
    if (!canBindMount(home, mirror)) {
      console.warn("skipped: bind mounts need root on Linux (the check's own logic is covered above)");
      return;
    }
    try {
      writeFileSync(join(dataDir, "local-ai.db"), "live");
      const err = await exportToFile(join(mirror, "data", "local-ai.db"), pieces(), dataDir).catch((e) => e);
      expect(err.data).toMatchObject({ field: "path", reason: "path_unwritable", problem: "EPERM" });
      expect(readFileSync(join(dataDir, "local-ai.db"), "utf8")).toBe("live");
      // The mirror's other folders are not data_dir: an export beside it is written.
      mkdirSync(join(mirror, "exports"));
      expect(await exportToFile(join(mirror, "exports", "a.md"), pieces(), dataDir)).toBe(5);
    } finally {
      Bun.spawnSync(["umount", mirror]);
    }
  });
});
