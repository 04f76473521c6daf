import { expect, spyOn, test } from "bun:test";
import { CoreServices } from "../../src/server/services.ts";
import { logger } from "../../src/util/logger.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Shutdown works without a config (services.ts): its KV zeroing step (kv-erase.ts `zeroed`) asked
// for the budgeted folder, which loads the config to learn `llama.kv_disk_bytes`; with none (or a
// refused one) that threw, and the core logged "stopping KV state zeroing failed" with a stack
// trace at every such shutdown. A folder never made has no zeroing to wait for.
test("a shutdown without a config stops the KV zeroing step quietly, the config never loaded", async () => {
  using dir = tmpdir();
  const services = new CoreServices({ configPath: "none.yaml", cwd: dir.path });
  const lines: string[] = [];
  const error = spyOn(logger, "error").mockImplementation((line: string) => void lines.push(line));
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    await services.stop();
  } finally {
    error.mockRestore();
    warn.mockRestore();
  }
  expect(lines).toEqual([]);
});
