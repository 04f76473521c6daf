import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { killRunningProbes } from "../../src/plan/run-probe.ts";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// doctor asks the configured llama-server (`--version`, `--list-devices`), each with up to 5 s:
// a binary that hangs (a GPU backend that never starts) held the core's stop those seconds,
// before llama-server's grace and the MCP servers' 4 s, past the host's wait (stop grace + 5 s),
// which then killed the core with llama-server running. Its probes die with the core.
describe.skipIf(process.platform === "win32")("doctor and the core's stop", () => {
  test("shutdown answers a doctor in flight cancelled at once, and cancel still cannot", async () => {
    using dir = tmpdir();
    const binary = join(dir.path, "llama-server");
    writeFileSync(binary, "#!/bin/sh\nexec sleep 600\n");
    chmodSync(binary, 0o755);
    writeFileSync(
      join(dir.path, "config.yaml"),
      `llama:\n  binary: ${binary}\nmodel:\n  path: ${writeFakeModel(dir.path)}\napp:\n  data_dir: ${join(dir.path, "data")}\n`,
    );
    const h = startHarness({ cwd: dir.path, configPath: join(dir.path, "config.yaml") });
    h.sendRaw(
      '{"id":"d","method":"doctor"}\n{"id":"c","method":"cancel","params":{"request_id":"d"}}\n{"id":"bye","method":"shutdown"}\n',
    );
    try {
      expect(await h.exit).toBe(0);
    } finally {
      // What serve-stdio does once the loop has ended: the hung binary's probes are not left behind.
      killRunningProbes();
    }
    expect(h.terminal("c")).toMatchObject({ type: "result", result: { cancelled: false } });
    expect(h.terminal("d")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
    const order = h.messages.filter((m) => m.type !== "event").map((m) => m.id);
    expect(order.indexOf("d")).toBeLessThan(order.indexOf("bye"));
  });
});
