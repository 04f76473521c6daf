import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// The listing's GGUF header reads (the model's, a projector found beside it) asked the core's
// shared drives, not the listing's `deps.drives`: a test could not fake them, and the listing's
// own drives' bound and lanes did not hold them. A stat that never settles stands in for a
// share gone offline (an NFS client with its server gone); the wait is 100 ms.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

describe("models: header reads go through the listing's drives", () => {
  test("a projector whose drive does not answer is not read: the model sees no images", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "vision.gguf", tinyLlama());
    const projector = writeGguf(dir.path, "mmproj-vision-f16.gguf", mmproj());
    const config = parseConfigText("model:\n  path: ./vision.gguf\n", join(dir.path, "config.yaml")).config;
    const asked: string[] = [];
    const drives = new ListingWhole({
      stat: (p: string) => {
        asked.push(p);
        return p === projector ? new Promise(() => {}) : Promise.resolve();
      },
      statWaitMs: 100,
      lanes: 4,
    });
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "none") },
      { probe, drives },
    );
    expect(asked).toContain(projector);
    expect(result.models.map((m) => [m.file, m.vision])).toEqual([["vision.gguf", false]]);
  });

  test("the model's header read asks them: a drive gone after the walk makes it unreadable", async () => {
    using dir = tmpdir();
    const model = writeGguf(dir.path, "m.gguf", tinyLlama());
    const config = parseConfigText("model:\n  path: ./m.gguf\n", join(dir.path, "config.yaml")).config;
    let modelStats = 0;
    const drives = new ListingWhole({
      // The walk's two stats answer (the candidate's parts, then model.path's); the header read's,
      // asked after them, never does.
      stat: (p: string) => (p === model && ++modelStats > 2 ? new Promise(() => {}) : Promise.resolve()),
      statWaitMs: 100,
      lanes: 4,
    });
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "none") },
      { probe, drives },
    );
    expect(result.models.map((m) => [m.file, m.problem])).toEqual([["m.gguf", "unreadable"]]);
  });
});
