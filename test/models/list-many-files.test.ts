import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { folderCandidates } from "../../src/models/list-candidates.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// A models folder of thousands of GGUFs (a shared NAS folder, an archive): the listing's
// bookkeeping before the first header looked each path up in an array of them all (quadratic),
// asked every path's drive and resolved every path in one stretch: 10,000 names held the loop
// ~0.3 s at once, ping and cancel with it (docs/models.md "`models`").

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

/** Every drive answers at once, in microtasks: no turn of the loop comes from the stats. */
class Answering extends ListingWhole {
  override async statOf(): Promise<null> {
    return null;
  }
}

describe("models: a folder of thousands of GGUFs", () => {
  test("the loop turns while the listing works through them, before the first header is read", async () => {
    using dir = tmpdir();
    const n = 2000;
    for (let i = 0; i < n; i++) writeFileSync(join(dir.path, `m${i}.gguf`), "");
    let turns = 0;
    let counting = true;
    const turn = () => {
      turns++;
      if (counting) setImmediate(turn);
    };
    const stop = new AbortController();
    let beforeFirstHeader = -1;
    setImmediate(turn);
    const listed = listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      {
        probe,
        drives: new Answering(),
        stop: stop.signal,
        readHeader: async () => {
          // Seen: the work up to here. The listing ends at the next file.
          if (beforeFirstHeader < 0) beforeFirstHeader = turns;
          stop.abort(new Error("seen"));
          throw new CoreError("model_missing", "not a GGUF", { problem: "not_gguf" });
        },
      },
    ).catch((e: Error) => e.message);
    try {
      expect(await listed).toBe("seen");
    } finally {
      counting = false;
    }
    // At least a turn per 500 paths: the old stretch gave the folder's listing's ~2, whatever its size.
    expect(beforeFirstHeader).toBeGreaterThanOrEqual(n / 500);
  });
});

describe("models: a folder's names", () => {
  test("are decoded and made candidates with turns of the loop between pieces", async () => {
    using dir = tmpdir();
    const n = 2000;
    for (let i = 0; i < n; i++) writeFileSync(join(dir.path, `m${i}.gguf`), "");
    const { value, turns } = await turnsDuring(() => folderCandidates(dir.path, { drives: new Answering() }));
    expect(value).toHaveLength(n);
    // A turn per 500 names at least: the old stretch gave the listing's one or two, whatever its size.
    expect(turns).toBeGreaterThanOrEqual(n / 500);
  });
});
