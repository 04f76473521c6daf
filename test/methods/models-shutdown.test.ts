import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
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
  // Not every file reaches the wait for the probe: one that cannot be read (a download cut
  // short, a file misnamed .gguf) is judged from its name alone, and only the check between
  // files ends a folder of them.
  const files = {
    GGUFs: (dir: string, i: number) => void writeGguf(dir, `m${i}-Q8_0.gguf`, tinyLlama()),
    "files it cannot read": (dir: string, i: number) =>
      writeFileSync(join(dir, `m${i}-Q8_0.gguf`), "not a GGUF at all"),
  };
  for (const [kind, write] of Object.entries(files))
    test(`a listing of ${kind} under way ends at the stop, at the next file, with cancelled`, async () => {
      using dir = tmpdir();
      for (let i = 0; i < 5; i++) write(dir.path, i);
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
      await expect(listing).rejects.toMatchObject({
        code: "cancelled",
        message: "the core is shutting down",
      });
      expect(read).toBe(1);
    });

  // The probe asks the configured llama-server (up to 5 s on a hung one): the stop must not wait for it.
  test("a listing waiting for the probe ends at the stop, not at its answer", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m-Q8_0.gguf", tinyLlama());
    const stop = new AbortController();
    let asked!: () => void;
    const probing = new Promise<void>((r) => {
      asked = r;
    });
    const listing = listModels(
      { config: defaultConfig(dir.path).config, configDir: dir.path, cacheDir: join(dir.path, "cache") },
      {
        stop: stop.signal,
        // It answers only a turn after the stop: a listing still waiting for it then lists.
        probe: () => {
          asked();
          return new Promise((r) =>
            stop.signal.addEventListener("abort", () => setImmediate(() => r(probe()))),
          );
        },
      },
    );
    await probing;
    stop.abort(new CoreError("cancelled", "the core is shutting down"));
    await expect(listing).rejects.toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  });

  test("a models request piped with its shutdown is listed within the stop's grace, and cancel cannot reach it", async () => {
    using dir = tmpdir();
    for (let i = 0; i < 20; i++) writeGguf(dir.path, `m${i}-Q8_0.gguf`, tinyLlama());
    const h = startHarness({ cwd: dir.path });
    // Read in one go, as a script pipes it: the listing starts only once its module loads, after
    // the stop began; a listing this short ends inside STOP_GRACE_MS (a longer one is stopped).
    h.sendRaw(
      '{"id":"m","method":"models"}\n{"id":"c","method":"cancel","params":{"request_id":"m"}}\n{"id":"bye","method":"shutdown"}\n',
    );
    expect(await h.exit).toBe(0);
    expect(h.terminal("c")).toMatchObject({ type: "result", result: { cancelled: false } });
    expect(h.terminal("m")?.result.models).toHaveLength(20);
    const order = h.messages.filter((m) => m.type !== "event").map((m) => m.id);
    expect(order.indexOf("m")).toBeLessThan(order.indexOf("bye"));
  });
});
