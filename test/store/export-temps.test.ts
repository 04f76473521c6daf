import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { spaceOf } from "../../src/platform/pid-space.ts";
import { exportToFile } from "../../src/store/export-file.ts";
import { sweepExportTemps } from "../../src/store/export-temps.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

async function* pieces(): AsyncIterable<string> {
  yield "hello ";
  yield "world";
}

// The note of an export under way (store/export-temps.ts) lives under data_dir; a data_dir that
// cannot take it (full, not writable) must not fail an export to a path elsewhere.
describe("exportToFile's note under data_dir", () => {
  test("a data_dir that cannot hold the note leaves the export to another folder done", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    writeFileSync(dataDir, "not a folder");
    const target = join(dir.path, "export.md");
    expect(await exportToFile(target, pieces(), dataDir)).toBe(11);
    expect(readFileSync(target, "utf8")).toBe("hello world");
  });

  // A real full file system (a tmpfs: root on Linux), else skipped and said so.
  const disk = smallDisk("1m", "export note on a full data_dir");
  afterAll(() => disk.dispose());

  test.skipIf(!disk.mounted)(
    "a data_dir on a full disk: the export is done, and no empty note stays there",
    async () => {
      await using dir = tmpdir();
      const dataDir = join(disk.path, "data");
      mkdirSync(join(dataDir, "run", "exports"), { recursive: true });
      fillDisk(join(disk.path, "filler"));
      const target = join(dir.path, "export.md");
      expect(await exportToFile(target, pieces(), dataDir)).toBe(11);
      expect(readFileSync(target, "utf8")).toBe("hello world");
      expect(readdirSync(join(dataDir, "run", "exports"))).toEqual([]);
    },
  );
});

// Its note's removal is the export's last step, after the rename: one that throws (a folder of
// its name here; on Windows a scanner holding the file) threw out of the export as a raw error,
// the file written in place, and again from the clean-up, so the host saw no export and no code.
describe("an export whose note cannot be removed", () => {
  test("is done all the same: its file in place and its size answered", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const notes = join(dataDir, "run", "exports");
    const target = join(dir.path, "export.md");
    const confirm = () => {
      const [note] = readdirSync(notes);
      rmSync(join(notes, note as string));
      mkdirSync(join(notes, note as string, "inside"), { recursive: true });
    };
    expect(await exportToFile(target, pieces(), dataDir, confirm)).toBe(11);
    expect(readFileSync(target, "utf8")).toBe("hello world");
  });
});

describe("the start-up sweep of unfinished exports", () => {
  test("a note it cannot remove (a folder of that name) does not keep the others' temp files", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const notes = join(dataDir, "run", "exports");
    mkdirSync(notes, { recursive: true });
    // A dead core's pid, far past any live one.
    const dead = 999_999_999;
    // Ten folders named as notes, listed in the folder's own order around the real one.
    for (let i = 0; i < 10; i++) mkdirSync(join(notes, `${dead}-${i.toString(16).padStart(12, "0")}.json`));
    const tmp = join(dir.path, ".export.md.0123456789ab.tmp");
    writeFileSync(tmp, "half an export");
    writeFileSync(join(notes, `${dead}-aaaaaaaaaaaa.json`), JSON.stringify({ tmp }));
    await sweepExportTemps(dataDir);
    expect(existsSync(tmp)).toBe(false);
    expect(existsSync(join(notes, `${dead}-aaaaaaaaaaaa.json`))).toBe(false);
  });
});

// A power cut, then a boot: the note's pid is often another process's by then (a daemon that
// lives for good), and the temp file of the conversation stayed beside the host's path for good.
/**
 * A temp file and its note, named by a live pid (this test's parent), written an hour ago with
 * `fields` besides the path; the folder's path and the note's time.
 */
function noteOfLivePid(dir: string, fields: Record<string, string> = {}) {
  const notes = join(dir, "data", "run", "exports");
  mkdirSync(notes, { recursive: true });
  const tmp = join(dir, ".export.md.0123456789ab.tmp");
  writeFileSync(tmp, "half an export");
  const note = join(notes, `${process.ppid}-aaaaaaaaaaaa.json`);
  writeFileSync(note, JSON.stringify({ tmp, ...fields }));
  const written = Date.now() - 3_600_000;
  utimesSync(note, written / 1000, written / 1000);
  return { tmp, note, written };
}

test("a note whose pid now names a process started after it was written is swept", async () => {
  using dir = tmpdir();
  const { tmp, note, written } = noteOfLivePid(dir.path);
  // Its writer, alive: started before the note was written.
  await sweepExportTemps(join(dir.path, "data"), () => written - 60_000);
  expect(existsSync(tmp)).toBe(true);
  // Another process with that pid, started since.
  await sweepExportTemps(join(dir.path, "data"), () => written + 600_000);
  expect(existsSync(tmp)).toBe(false);
  expect(existsSync(note)).toBe(false);
});

// The wall clock stepped forward since the note (NTP at boot, a VM resumed from a pause): its
// writer, still exporting, looks started after its own note, and another core's start removed the
// temp file under it. A note that records its writer's start as the OS tells it (no clock) is kept
// while that pid's start is the same.
test("a note whose pid's start is the one it recorded is kept, however the clock moved", async () => {
  using dir = tmpdir();
  const { tmp, note, written } = noteOfLivePid(dir.path, { start: "4242" });
  const stepped = () => written + 600_000;
  await sweepExportTemps(join(dir.path, "data"), stepped, () => "4242");
  expect(existsSync(tmp)).toBe(true);
  // Another process with that pid: started at another time.
  await sweepExportTemps(join(dir.path, "data"), stepped, () => "5151");
  expect(existsSync(tmp)).toBe(false);
  expect(existsSync(note)).toBe(false);
});

// The start-up sweep read each note with readFileSync: a FIFO at a note's name (a run folder made
// beforehand by another user in a data_dir others may write, which the core cannot tighten)
// blocked the core's start for good. In a child: a blocked read would block this test's thread.
describe.skipIf(process.platform === "win32")("the sweep of a note that is not a regular file", () => {
  test("a FIFO is not waited on: the start goes on and the name is cleared", () => {
    using dir = tmpdir();
    const notes = join(dir.path, "run", "exports");
    mkdirSync(notes, { recursive: true });
    const note = join(notes, "999999999-0123456789ab.json");
    expect(spawnSync("mkfifo", [note]).status).toBe(0);
    const code = `import { sweepExportTemps } from ${JSON.stringify(join(import.meta.dir, "../../src/store/export-temps.ts"))};
      await sweepExportTemps(${JSON.stringify(dir.path)}); console.log("swept");`;
    // The limit only ends a child that hangs; it times nothing.
    const child = spawnSync(process.execPath, ["-e", code], { timeout: 20_000, encoding: "utf8" });
    expect({ signal: child.signal, out: child.stdout.trim() }).toEqual({ signal: null, out: "swept" });
    expect(existsSync(note)).toBe(false);
  });
});

// Two containers (or machines) on one data folder: a core's start swept the note of an export
// another core of another pid space was writing, its pid naming no process here, and zeroed and
// removed the temp file under it (the export failed at its rename). A note of another pid space
// is left to its writer until it is older than any export takes.
/** An export's temp and its note by a core of the pid space "there", its pid `pid`. */
function foreignNote(dir: string, pid: number, space = "there"): { tmp: string; note: string } {
  const notes = join(dir, "data", "run", "exports");
  mkdirSync(notes, { recursive: true });
  const tmp = join(dir, ".export.md.0123456789ab.tmp");
  writeFileSync(tmp, "half an export");
  const note = join(notes, `${pid}-aaaaaaaaaaaa.json`);
  writeFileSync(note, JSON.stringify({ tmp, space }));
  return { tmp, note };
}

test("a note of another pid space is kept while fresh, whatever its pid names here", async () => {
  using dir = tmpdir();
  const { tmp, note } = foreignNote(dir.path, 4_194_304 + 7);
  await sweepExportTemps(join(dir.path, "data"), undefined, undefined, "here");
  expect([existsSync(tmp), existsSync(note)]).toEqual([true, true]);
  const old = (Date.now() - 2 * 24 * 3_600_000) / 1000;
  utimesSync(note, old, old);
  await sweepExportTemps(join(dir.path, "data"), undefined, undefined, "here");
  expect([existsSync(tmp), existsSync(note)]).toEqual([false, false]);
});

// A core in a container is often pid 1, and pid 1 here (init) lives for good and started before
// any note: an old note of another pid space was then judged by that pid, its writer "alive",
// and the temp file under it (a conversation's words in the host's folder) kept for ever.
test("an old note of another pid space is swept even if its pid names a live process here", async () => {
  using dir = tmpdir();
  const { tmp, note } = foreignNote(dir.path, process.ppid);
  const old = (Date.now() - 2 * 24 * 3_600_000) / 1000;
  utimesSync(note, old, old);
  await sweepExportTemps(
    join(dir.path, "data"),
    () => 0,
    () => null,
    "here",
  );
  expect([existsSync(tmp), existsSync(note)]).toEqual([false, false]);
});

// A crash or power cut mid-export, then a reboot: the note names this host's previous boot, read
// as another pid space, and the half-written export (a conversation's words in the host's folder)
// stayed a day. A previous boot's writer is gone, whatever its pid (here a live one) names now.
test("a note of this host's previous boot is swept at once; another machine's is kept", async () => {
  using dir = tmpdir();
  const ns = "pid:[4026531836]";
  const here = spaceOf("box", "boot-2", ns);
  const sweep = () =>
    sweepExportTemps(
      join(dir.path, "data"),
      () => 0,
      () => null,
      here,
    );
  const theirs = foreignNote(dir.path, process.ppid, spaceOf("other", "boot-1", ns));
  await sweep();
  expect([existsSync(theirs.tmp), existsSync(theirs.note)]).toEqual([true, true]);
  // Another machine of this host's name, its export begun since this boot: read as a previous
  // boot by its name alone, its half-written export was removed under it. Kept.
  const old = foreignNote(dir.path, process.ppid, spaceOf("box", "boot-1", ns));
  await sweep();
  expect([existsSync(old.tmp), existsSync(old.note)]).toEqual([true, true]);
  // Written before this boot began (the test machine's): 1970.
  utimesSync(old.note, 1, 1);
  await sweep();
  expect([existsSync(old.tmp), existsSync(old.note)]).toEqual([false, false]);
});

// A note names the temp file beside the host's target, so the target's name (often a title) is in
// it: removed unzeroed, that name stayed in the freed blocks (docs/protocol.md, sessions.export).
describe("an export's note is zeroed before it goes", () => {
  const zeroed = (fd: number) => {
    const bytes = readFileSync(fd);
    return bytes.length > 0 && bytes.every((b) => b === 0);
  };

  test("at the export's end", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const notes = join(dataDir, "run", "exports");
    const target = join(dir.path, "Secret title.md");
    let held: number | undefined;
    const confirm = () => {
      const [note] = readdirSync(notes);
      held = openSync(join(notes, note as string), "r");
    };
    expect(await exportToFile(target, pieces(), dataDir, confirm)).toBe(11);
    expect(readdirSync(notes)).toEqual([]);
    try {
      expect(zeroed(held as number)).toBe(true);
    } finally {
      closeSync(held as number);
    }
  });

  test("at the start-up sweep of a dead core's", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    const notes = join(dataDir, "run", "exports");
    mkdirSync(notes, { recursive: true });
    const tmp = join(dir.path, ".Secret title.md.0123456789ab.tmp");
    writeFileSync(tmp, "half an export");
    const note = join(notes, "999999999-bbbbbbbbbbbb.json");
    writeFileSync(note, JSON.stringify({ tmp }));
    const held = openSync(note, "r");
    try {
      await sweepExportTemps(dataDir);
      expect(existsSync(note)).toBe(false);
      expect(zeroed(held)).toBe(true);
    } finally {
      closeSync(held);
    }
  });
});
