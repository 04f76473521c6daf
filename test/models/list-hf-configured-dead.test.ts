import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// model.path an `hf:` reference and the hub cache on a share gone offline: the listing left the
// cache out, then resolved the configured reference in it with synchronous reads (existsSync,
// readFileSync of refs/main, a snapshot's walk), which hang on a dead mount, and the core with them.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

afterEach(() => {
  (fs.existsSync as unknown as { mockRestore?: () => void }).mockRestore?.();
});

describe("models: an hf: model.path in a cache that does not answer", () => {
  test("is not resolved synchronously in it", async () => {
    using dir = tmpdir();
    const cacheDir = join(dir.path, "hub-on-nas");
    const config = parseConfigText(
      "model:\n  path: hf:org/name:Q4_K_M\n",
      join(dir.path, "config.yaml"),
    ).config;
    const drives = new ListingWhole({
      stat: (p: string) => (p.startsWith(cacheDir) ? new Promise(() => {}) : Promise.resolve()),
      statWaitMs: 100, // the real listings beside the dead cache are bound by it too
      lanes: 4,
    });
    const exists = spyOn(fs, "existsSync");
    const result = await listModels({ config, configDir: dir.path, cacheDir }, { probe, drives });
    expect(result.left_out).toContainEqual({ path: cacheDir, reason: "no_answer" });
    expect(exists.mock.calls.map((c) => String(c[0])).filter((p) => p.startsWith(cacheDir))).toEqual([]);
  });
});
