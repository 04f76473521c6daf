import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { memoryFoldersCheck } from "../../src/doctor/folders-check.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { runWithTimeout } from "../../src/plan/probe.ts";
import { CoreServices } from "../../src/server/services.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// doctor's memory_folders (docs/doctor.md): a folder past the index's cap of files, which the
// core only logs, is told to the host; so is one that cannot be read.

function notes(dir: string, name: string, count: number): string {
  const folder = join(dir, name);
  mkdirSync(folder, { recursive: true });
  for (let i = 0; i < count; i++) writeFileSync(join(folder, `n${i}.md`), `note ${i}`);
  return folder;
}

function config(dir: string, folders: string[]): CoreServices {
  const yaml = `memory:\n  folders: [${folders.map((f) => JSON.stringify(f)).join(", ")}]\napp:\n  data_dir: ./data\n`;
  writeFileSync(join(dir, "config.yaml"), yaml);
  return new CoreServices({ configPath: "config.yaml", cwd: dir });
}

describe("doctor's memory_folders", () => {
  test("warns about a folder over the cap and one that cannot be read; counts the files", async () => {
    using dir = tmpdir();
    const small = notes(dir.path, "small", 2);
    const big = notes(dir.path, "big", 4);
    const gone = join(dir.path, "gone");
    const loaded = config(dir.path, [small, big, gone]).loadedConfig();
    const [check] = await memoryFoldersCheck(loaded.config, loaded.file, 3);
    expect(check).toMatchObject({ id: "memory_folders", status: "warn" });
    expect(check?.message).toBe(
      `memory folders: cannot be read: ${gone}; more than 3 text files (only 3 of each are indexed): ${big}`,
    );
    expect(check?.fix).toContain("subfolders");
    expect(check?.data).toEqual({
      folders: [
        { path: small, files: 2, full: false, readable: true, skipped: 0 },
        { path: big, files: 3, full: true, readable: true, skipped: 0 },
        { path: gone, files: 0, full: false, readable: false, skipped: 0 },
      ],
      max_files: 3,
    });
  });

  test("ok under the cap, the core's own files left out as the index does; no check without folders", async () => {
    using dir = tmpdir();
    // The folder holds the config and data_dir: neither is counted.
    notes(dir.path, "data", 2);
    writeFileSync(join(dir.path, "a.md"), "a note");
    const loaded = config(dir.path, ["."]).loadedConfig();
    expect(await memoryFoldersCheck(loaded.config, loaded.file, 3)).toEqual([
      {
        id: "memory_folders",
        status: "ok",
        message: "1 memory folder(s), 1 text file(s) to index",
        data: {
          folders: [{ path: dir.path, files: 1, full: false, readable: true, skipped: 0 }],
          max_files: 3,
        },
      },
    ]);
    const none = config(dir.path, []).loadedConfig();
    expect(await memoryFoldersCheck(none.config, none.file)).toEqual([]);
  });

  test("is in doctor's report, after store", async () => {
    using dir = tmpdir();
    const core = config(dir.path, [notes(dir.path, "n", 1)]);
    const r = await runDoctor(core, {
      readModel: defaultPlanDeps.readModel,
      probe: async () => cpuOnlyMachine(),
      run: (cmd, args) => runWithTimeout(cmd, args, 500),
    });
    const ids = r.checks.map((c) => c.id);
    expect(ids.indexOf("memory_folders")).toBe(ids.indexOf("store") + 1);
  });
});

// A folder whose walk failed (its drive did not answer, the core out of open files) was told as
// "cannot be read" with the fix to check that it exists: the walk's reason was dropped, and a
// host was sent to look for a folder that is there, on a share offline.
test("a folder whose walk fails is told with why", async () => {
  using dir = tmpdir();
  const share = notes(dir.path, "share", 1);
  const loaded = config(dir.path, [share]).loadedConfig();
  const [check] = await memoryFoldersCheck(loaded.config, loaded.file, 3, deadDrive([]));
  expect(check?.message).toBe(
    `memory folders: cannot be read: ${share} (${share}: its drive did not answer within 0 s (a network drive offline?))`,
  );
});
