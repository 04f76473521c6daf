import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { writeFakeLlamaServer } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * `local-ai plan --json` asks the configured llama-server which devices it can use
 * (docs/plan.md "Which GPUs"): the stand-in answers `--list-devices` as b10587 does
 * (transcripts/84; FAKE_LLAMA_DEVICES for a GPU build's lines).
 */
const ENTRY = join(import.meta.dir, "../../src/index.ts");

async function planJson(dir: string): Promise<Record<string, any>> {
  const r = Bun.spawnSync([process.execPath, ENTRY, "plan", "--json"], { cwd: dir, stdin: "ignore" });
  expect({ code: r.exitCode, stderr: r.exitCode === 0 ? "" : r.stderr.toString() }).toEqual({
    code: 0,
    stderr: "",
  });
  return JSON.parse(r.stdout.toString());
}

function setUp(dir: string, devices?: string): void {
  writeGguf(dir, "model.gguf", tinyLlama());
  const binary = writeFakeLlamaServer(dir, devices === undefined ? {} : { FAKE_LLAMA_DEVICES: devices });
  writeFileSync(
    join(dir, "config.yaml"),
    `llama:\n  binary: ${JSON.stringify(binary)}\nmodel:\n  path: ./model.gguf\n`,
  );
}

describe("plan asks llama-server for its devices", () => {
  test("a Vulkan build's GPU that no vendor tool sees is planned, under llama-server's name", async () => {
    using dir = tmpdir();
    setUp(dir.path, "  Vulkan0: AMD Radeon RX 7800 XT (RADV NAVI32) (16368 MiB, 15000 MiB free)");
    const plan = await planJson(dir.path);
    const gpu = plan.hardware.gpus.find((g: { device?: string }) => g.device === "Vulkan0");
    expect(gpu).toMatchObject({ vendor: "amd", backend: "vulkan", unified: false });
    expect(plan.hardware.probes.find((p: { id: string }) => p.id === "llama-server")).toMatchObject({
      status: "ok",
    });
    expect(plan.plan.gpu_layers_all).toBe(true);
  });

  test("a CPU build (transcripts/84: '(none)'): nothing offloaded", async () => {
    using dir = tmpdir();
    setUp(dir.path);
    const plan = await planJson(dir.path);
    expect(plan.hardware.gpus).toEqual([]);
    const { argv } = plan.plan;
    expect(argv[argv.indexOf("-ngl") + 1]).toBe("0");
    expect(plan.hardware.probes.find((p: { id: string }) => p.id === "llama-server").message).toBe(
      "llama-server lists no GPU device",
    );
  });
});
