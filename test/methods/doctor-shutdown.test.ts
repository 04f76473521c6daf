import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// doctor (and plan) asks the configured llama-server (`--version`, `--list-devices`), each with up to 5 s:
// a binary that hangs (a GPU backend that never starts) held the core's stop those seconds,
// before llama-server's grace and the MCP servers' 4 s, past the host's wait (stop grace + 5 s),
// which then killed the core with llama-server running. Its probes end with the core.
describe.skipIf(process.platform === "win32")("doctor and plan and the core's stop", () => {
  for (const method of ["doctor", "plan"])
    test(`shutdown answers a ${method} in flight cancelled at once, and cancel still cannot`, async () => {
      await stoppedWhileProbing(method);
    });
  for (const method of ["doctor", "plan"])
    for (const stop of ["shutdown", "signal"])
      test(`a ${method} read once a stop (${stop}) has begun is refused at once and starts no probe`, async () => {
        await readWhileStopping(method, stop);
      });
});

/** A `method` read after a stop began (a shutdown before it, a signal): refused, no probe run. */
async function readWhileStopping(method: string, stop: string): Promise<void> {
  using dir = tmpdir();
  const binary = join(dir.path, "llama-server");
  const started = join(dir.path, "started");
  // Marks that it ran, then hangs: a probe begun would hold the answer to the stop's grace (2 s).
  writeFileSync(
    binary,
    `#!/bin/sh\ntouch '${started}'\ni=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n`,
  );
  chmodSync(binary, 0o755);
  const config = join(dir.path, "config.yaml");
  writeFileSync(config, `llama:\n  binary: ${binary}\nmodel:\n  path: ${writeFakeModel(dir.path)}\n`);
  const h = startHarness({ cwd: dir.path, configPath: config });
  if (stop === "signal") h.signal("SIGTERM");
  h.sendRaw(
    `${stop === "shutdown" ? '{"id":"bye","method":"shutdown"}\n' : ""}{"id":"d","method":"${method}"}\n`,
  );
  h.end();
  expect(await h.exit).toBe(0);
  expect(h.terminal("d")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  expect(existsSync(started)).toBe(false);
}

/** A `method` whose probe of a hung llama-server has begun, then shutdown: how each is answered. */
async function stoppedWhileProbing(method: string): Promise<void> {
  using dir = tmpdir();
  const binary = join(dir.path, "llama-server");
  // Hung until the test lets it go: the probes' own 5 s timeout never comes into it.
  const release = join(dir.path, "release");
  writeFileSync(binary, `#!/bin/sh\nwhile [ ! -e '${release}' ]; do sleep 0.05; done\nexit 1\n`);
  chmodSync(binary, 0o755);
  writeFileSync(
    join(dir.path, "config.yaml"),
    `llama:\n  binary: ${binary}\nmodel:\n  path: ${writeFakeModel(dir.path)}\napp:\n  data_dir: ${join(dir.path, "data")}\n`,
  );
  const h = startHarness({ cwd: dir.path, configPath: join(dir.path, "config.yaml") });
  h.sendRaw(
    `{"id":"d","method":"${method}"}\n{"id":"c","method":"cancel","params":{"request_id":"d"}}\n{"id":"bye","method":"shutdown"}\n`,
  );
  try {
    expect(await h.exit).toBe(0);
  } finally {
    // serve-stdio kills the probes left once its loop ends (killRunningProbes); in-process, they are let go.
    writeFileSync(release, "");
  }
  expect(h.terminal("c")).toMatchObject({ type: "result", result: { cancelled: false } });
  expect(h.terminal("d")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  const order = h.messages.filter((m) => m.type !== "event").map((m) => m.id);
  expect(order.indexOf("d")).toBeLessThan(order.indexOf("bye"));
}
