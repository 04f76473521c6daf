import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { defaultConfig } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });

// A folder of thousands of GGUFs (~2 ms each) held the stop past the host's limit (stop grace
// + 5 s), which then killed the core with llama-server still running. `cancel` cannot reach a
// `models` listing (docs/protocol.md); the core's stop must.
describe("models and the core's stop", () => {
  test("a listing under way ends at the stop, at the next file, with cancelled", async () => {
    using dir = tmpdir();
    for (let i = 0; i < 5; i++) writeGguf(dir.path, `m${i}-Q8_0.gguf`, tinyLlama());
    const stop = new AbortController();
    let read = 0;
    const listing = listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      {
        probe,
        stop: stop.signal,
        readHeader: (path) => {
          read++;
          // The stop begins while the first file is read.
          stop.abort(new CoreError("cancelled", "the core is shutting down"));
          return readGgufHeader(path);
        },
      },
    );
    await expect(listing).rejects.toMatchObject({ code: "cancelled", message: "the core is shutting down" });
    expect(read).toBe(1);
  });

  test("shutdown answers a models request in flight cancelled, and cancel still cannot", async () => {
    using dir = tmpdir();
    for (let i = 0; i < 20; i++) writeGguf(dir.path, `m${i}-Q8_0.gguf`, tinyLlama());
    const h = startHarness({ cwd: dir.path });
    // Read in one go: the listing starts only once its module loads, after the stop began.
    h.sendRaw(
      '{"id":"m","method":"models"}\n{"id":"c","method":"cancel","params":{"request_id":"m"}}\n{"id":"bye","method":"shutdown"}\n',
    );
    expect(await h.exit).toBe(0);
    expect(h.terminal("c")).toMatchObject({ type: "result", result: { cancelled: false } });
    expect(h.terminal("m")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
    const order = h.messages.filter((m) => m.type !== "event").map((m) => m.id);
    expect(order.indexOf("m")).toBeLessThan(order.indexOf("bye"));
  });
});
