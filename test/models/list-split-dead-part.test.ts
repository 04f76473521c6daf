import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// A split model whose later part is a link onto a share gone offline: only the first part's drive
// was asked, then the listing stat'ed every part synchronously (an incomplete split's size, a
// broken link's check), and a stat on a dead mount hangs the core, ping and cancel with it.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

afterEach(() => {
  (fs.statSync as unknown as { mockRestore?: () => void }).mockRestore?.();
  (fs.lstatSync as unknown as { mockRestore?: () => void }).mockRestore?.();
});

/** A folder with `names` written, the last one on a dead drive, and a config naming none of them. */
function splitOnDeadDrive(dir: string, names: string[]) {
  for (const n of names) writeGguf(dir, n, tinyLlama());
  const dead = join(dir, names.at(-1)!);
  const config = parseConfigText("model:\n  path: ./none.gguf\n", join(dir, "config.yaml")).config;
  const drives = new ListingWhole({
    stat: (p: string) => (p === dead ? new Promise(() => {}) : Promise.resolve()),
    statWaitMs: 100, // the real listings beside the dead path are bound by it too
    lanes: 4,
  });
  return { dead, input: { config, configDir: dir, cacheDir: join(dir, "no-cache") }, drives };
}

const syncStatsOf = (spies: { mock: { calls: unknown[][] } }[], path: string) =>
  spies.flatMap((s) => s.mock.calls.map((c) => String(c[0]))).filter((p) => p === path);

describe("models: a split model's part whose drive does not answer", () => {
  test("an incomplete split's size is not stat'ed there", async () => {
    using dir = tmpdir();
    const { dead, input, drives } = splitOnDeadDrive(dir.path, [
      "m-00001-of-00003.gguf",
      "m-00003-of-00003.gguf",
    ]);
    const spies = [spyOn(fs, "statSync"), spyOn(fs, "lstatSync")];
    const result = await listModels(input, { probe, drives });
    expect(result.models.map((m) => m.problem)).toEqual(["incomplete_split"]);
    expect(syncStatsOf(spies, dead)).toEqual([]);
  });

  test("a whole split whose later part's read was late: no broken-link check stats it", async () => {
    using dir = tmpdir();
    const { dead, input, drives } = splitOnDeadDrive(dir.path, [
      "n-00001-of-00002.gguf",
      "n-00002-of-00002.gguf",
    ]);
    // As plan/gguf-read.ts readOneFile fails a shard whose stat is late.
    const readHeader = async (path: string) => {
      throw new CoreError("model_missing", `model ${path}: unreadable: late`, {
        path,
        problem: "unreadable",
      });
    };
    const spies = [spyOn(fs, "statSync"), spyOn(fs, "lstatSync")];
    const result = await listModels(input, { probe, drives, readHeader });
    expect(result.models.map((m) => m.problem)).toEqual(["unreadable"]);
    expect(syncStatsOf(spies, dead)).toEqual([]);
  });
});
