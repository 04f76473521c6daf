import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { runWithTimeout } from "../../src/plan/probe.ts";
import { knownChildMode, probeChildMode } from "../../src/runtime/child-mode.ts";
import { CoreServices } from "../../src/server/services.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// doctor says whether llama-server runs as the core's child (docs/supervisor.md#child-mode,
// test/fixtures/llama-server/transcripts/90-child-mode-supervision.txt), asked of the binary by
// what it does: started as a child with no model to load, a build that speaks it prints its first
// state line before it fails.

async function binaryCheckOf(dir: string, binary: string) {
  writeFileSync(
    join(dir, "config.yaml"),
    `llama:\n  binary: ${binary}\nmodel:\n  path: ${writeFakeModel(dir)}\n`,
  );
  const core = new CoreServices({ configPath: "config.yaml", cwd: dir });
  const report = await runDoctor(core, {
    readModel: defaultPlanDeps.readModel,
    probe: async () => cpuOnlyMachine(),
    run: (cmd, args) => runWithTimeout(cmd, args, 5000),
  });
  return report.checks.find((c) => c.id === "binary");
}

describe.skipIf(process.platform === "win32")("doctor and child mode", () => {
  test("a build that speaks it: child_mode true, and the message says it exits with the core (90)", async () => {
    await using dir = tmpdir();
    const check = await binaryCheckOf(dir.path, writeFakeLlamaServer(dir.path));
    expect(check).toMatchObject({ status: "ok", data: { child_mode: true } });
    expect(check?.message).toContain("exits with the core");
  });

  test("a build without it: child_mode false, and the message names the next start's reaping", async () => {
    await using dir = tmpdir();
    const check = await binaryCheckOf(
      dir.path,
      writeFakeLlamaServer(dir.path, { FAKE_LLAMA_NO_CHILD_MODE: "1" }),
    );
    expect(check).toMatchObject({ status: "ok", data: { child_mode: false } });
    expect(check?.message).toContain("until the next start stops it");
  });

  test("the probe's answer is remembered per file version; one that does not exit in time is unknown and not remembered", async () => {
    await using dir = tmpdir();
    const binary = writeFakeLlamaServer(dir.path);
    expect(await probeChildMode(binary, process.env)).toBe(true);
    expect(await knownChildMode(binary)).toBe(true);
    const slow = join(dir.path, "slow-llama-server");
    writeFileSync(slow, "#!/bin/sh\nsleep 5\n");
    chmodSync(slow, 0o755);
    expect(await probeChildMode(slow, process.env, 300)).toBeNull();
    expect(await knownChildMode(slow)).toBeUndefined();
  });
});
