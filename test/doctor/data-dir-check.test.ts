import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { dataDirCheck } from "../../src/doctor/data-dir-check.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

describe.skipIf(process.platform === "win32")("doctor: data_dir writable by others", () => {
  test("group- or world-writable: a warning naming the mode and the fix; owner-only: no warning", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data);
    for (const mode of [0o777, 0o775, 0o1777]) {
      chmodSync(data, mode);
      const c = dataDirCheck(configAt(data));
      expect(c).toMatchObject({
        id: "data_dir",
        status: "warn",
        data: { path: data, mode: (mode & 0o777).toString(8) },
      });
      expect(c.message).toContain("writable by other users");
      expect(c.fix).toContain(`chmod 700 ${data}`);
    }
    chmodSync(data, 0o700);
    expect(dataDirCheck(configAt(data)).message).not.toContain("other users");
  });
});

// A real full file system (a tmpfs: root on Linux), else skipped and said so.
const disk = smallDisk("1m", "data-dir-check full disk");
afterAll(() => disk.dispose());

describe("doctor: data_dir on a full disk", () => {
  test.skipIf(!disk.mounted)(
    "fails naming ENOSPC with a fix that frees space, and leaves no probe file",
    () => {
      const data = join(disk.path, "data");
      mkdirSync(data, { mode: 0o700 });
      fillDisk(join(disk.path, "filler"));
      const c = dataDirCheck(configAt(data));
      expect(c).toMatchObject({ id: "data_dir", status: "fail", data: { path: data, problem: "ENOSPC" } });
      expect(c.fix).toContain("free some disk space");
      // Diagnosing creates nothing: the probe the write failed in is gone too.
      expect(readdirSync(data)).toEqual([]);
    },
  );
});
