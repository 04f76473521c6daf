import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// model.path on a dead network mount, or a link into one beside the config: the listing's
// synchronous walk (readdir, realpath, stat) hung for minutes on it, and the core with it.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

afterEach(() => {
  (fs.realpathSync.native as unknown as { mockRestore?: () => void }).mockRestore?.();
});

describe("models: a drive that does not answer", () => {
  test("its folder and a link into it are left out, nothing synchronous touches them, the rest is listed", async () => {
    using dir = tmpdir();
    const nas = join(dir.path, "nas");
    fs.mkdirSync(nas);
    writeGguf(nas, "far.gguf", tinyLlama());
    writeGguf(dir.path, "near.gguf", tinyLlama());
    fs.symlinkSync(join(nas, "far.gguf"), join(dir.path, "linked.gguf"));
    const config = parseConfigText("model:\n  path: ./nas/far.gguf\n", join(dir.path, "config.yaml")).config;
    const silent = (p: string) => p.startsWith(nas) || p.endsWith("linked.gguf");
    const asked: string[] = [];
    // The near folder's listing is not what hangs here: it runs whole, outside the lanes (a real
    // listing lost that race under load).
    const drives = new ListingWhole({
      stat: (p: string) => {
        asked.push(p);
        return silent(p) ? new Promise(() => {}) : Promise.resolve();
      },
      // The listing's own bound (list-candidates.ts `bounded`) is this wait too: 1 ms lost the
      // near folder's real readdir on a loaded box even with the lanes out of the way.
      statWaitMs: 100,
      // Three dead paths hang at once here: with fewer file threads than that, the rest is refused
      // too (drive-answers.test.ts), as it waited behind them before.
      lanes: 4,
    });
    const realpath = spyOn(fs.realpathSync, "native");
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      { probe, drives },
    );
    expect(result.models.map((m) => m.file)).toEqual(["near.gguf"]);
    expect(result.models[0]).toMatchObject({ configured: false });
    // Said in the result too (docs/models.md "What was left out"), not only in the log.
    expect(result.left_out).toEqual([
      { path: join(dir.path, "linked.gguf"), reason: "no_answer" },
      { path: nas, reason: "no_answer" },
    ]);
    expect(asked).toContain(nas);
    expect(realpath.mock.calls.map((c) => String(c[0])).filter(silent)).toEqual([]);
  });
});
