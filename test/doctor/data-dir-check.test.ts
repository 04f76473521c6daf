import { afterAll, describe, expect, setSystemTime, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
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

describe.skipIf(process.platform === "win32")("doctor: the probe file in a shared data_dir", () => {
  test("the chmod fix quotes a folder whose name a shell would split", () => {
    // Pasted, `chmod 700 /tmp/x/my data` made /tmp/x/my and ./data owner-only instead.
    using dir = tmpdir();
    const data = join(dir.path, "my data");
    mkdirSync(data);
    chmodSync(data, 0o777);
    expect(dataDirCheck(configAt(data)).fix).toStartWith(`chmod 700 '${data}' `);
  });

  test("a link planted where the probe file goes is not written through", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data);
    chmodSync(data, 0o777);
    const precious = join(dir.path, "precious.txt");
    writeFileSync(precious, "the user's own file");
    // The name another user of the folder could guess (the probe's was its pid and the time),
    // planted as a link to a file of the user's.
    setSystemTime(new Date(1_800_000_000_000));
    try {
      symlinkSync(precious, join(data, `.doctor-${process.pid}-${Date.now()}`));
      // The folder is usable all the same (the warning of a shared folder), the probe gone.
      expect(dataDirCheck(configAt(data))).toMatchObject({ status: "warn", data: { mode: "777" } });
    } finally {
      setSystemTime();
    }
    expect(readFileSync(precious, "utf8")).toBe("the user's own file");
    expect(readdirSync(data)).toHaveLength(1);
  });
});

// The folders the core writes in under data_dir were not looked at: one left root's by a `sudo`
// run, made read-only, or a file or link in its place passed the check, and the core failed
// later with a vaguer error (a start without its log, a pid record not kept).
describe.skipIf(process.platform === "win32")("doctor: the folders the core writes in under data_dir", () => {
  /** A probe that refuses `refused` as a user's write to a folder root left would be (EACCES). */
  const refusing = (refused: string) => (at: string) => {
    if (at === refused) throw Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" });
  };

  test("one this user cannot write in fails, naming it, with a fix by its owner", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    for (const sub of ["logs", "run/exports", "run/mcp", "kv"])
      mkdirSync(join(data, sub), { recursive: true, mode: 0o700 });
    chmodSync(data, 0o700);
    // run/mcp too: an MCP server's process record is written there, and one not kept is an
    // orphan no later start sweeps.
    for (const sub of ["logs", "run", "run/exports", "run/mcp", "kv"]) {
      const at = join(data, sub);
      const c = dataDirCheck(configAt(data), refusing(at));
      expect(c).toMatchObject({
        id: "data_dir",
        status: "fail",
        data: { path: data, at, problem: "EACCES" },
      });
      expect(c.message).toContain(at);
      // This user owns it (a chmod 0500, a read-only mount): its mode is the fix.
      expect(c.fix).toStartWith(`chmod 700 ${at}`);
    }
    // Another user owns it (a run with sudo left it root's): its owner is the fix.
    const logs = join(data, "logs");
    if (process.getuid?.() === 0) {
      chownSync(logs, 65534, 65534);
      expect(dataDirCheck(configAt(data), refusing(logs)).fix).toStartWith(
        `sudo chown -R "$(id -un)" ${logs}`,
      );
    }
    // All writable: the check passes as before.
    expect(dataDirCheck(configAt(data)).status).not.toBe("fail");
  });

  // Windows has no chmod or chown (a folder's ACL says who writes it), macOS no chattr: the fix
  // named commands that do not exist there.
  test("the fix names what the OS has: no chmod on Windows, chflags for a locked folder on macOS", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    const kv = join(data, "kv");
    mkdirSync(kv, { recursive: true, mode: 0o700 });
    chmodSync(data, 0o700);
    const refused = (code: string) => (at: string) => {
      if (at === kv) throw Object.assign(new Error(code), { code });
    };
    const real = Object.getOwnPropertyDescriptor(process, "platform") as PropertyDescriptor;
    const on = (platform: string, code: string) => {
      Object.defineProperty(process, "platform", { ...real, value: platform });
      try {
        return dataDirCheck(configAt(data), refused(code)).fix ?? "";
      } finally {
        Object.defineProperty(process, "platform", real);
      }
    };
    for (const code of ["EACCES", "EPERM"]) {
      const fix = on("win32", code);
      expect(fix).toContain(`give this user write access to ${kv}`);
      expect(fix).not.toMatch(/chmod|chown|chattr/);
    }
    expect(on("darwin", "EPERM")).toStartWith(`chflags nouchg ${kv}`);
    expect(on("linux", "EPERM")).toStartWith(`chattr -i ${kv}`);
  });

  test("a file or a link where one of them goes fails: the core refuses both", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data, { mode: 0o700 });
    writeFileSync(join(data, "logs"), "");
    const file = dataDirCheck(configAt(data));
    expect(file).toMatchObject({ status: "fail", data: { at: join(data, "logs"), problem: "ENOTDIR" } });
    expect(file.fix).toContain("out of the way");
    unlinkSync(join(data, "logs"));
    mkdirSync(join(dir.path, "elsewhere"));
    symlinkSync(join(dir.path, "elsewhere"), join(data, "run"));
    expect(dataDirCheck(configAt(data))).toMatchObject({
      status: "fail",
      data: { at: join(data, "run"), problem: "ELOOP" },
    });
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
