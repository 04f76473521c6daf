import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { mcpChecks } from "../../src/doctor/checks.ts";
import { type DoctorDeps, runDoctor } from "../../src/doctor/doctor.ts";
import { renderDoctor } from "../../src/doctor/render.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { runWithTimeout } from "../../src/plan/probe.ts";
import { DoctorResultSchema } from "../../src/protocol/doctor.ts";
import { CoreServices } from "../../src/server/services.ts";
import { denseModel, llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const HW: HardwareSnapshot = cpuOnlyMachine({
  probes: [{ id: "nvidia-smi", status: "absent", message: "nvidia-smi not found", ms: 1 }],
});

// Real model reading, fake probes, a --version runner with a short timeout.
const deps = (hw: HardwareSnapshot = HW): DoctorDeps => ({
  readModel: defaultPlanDeps.readModel,
  probe: async () => hw,
  run: (cmd, args) => runWithTimeout(cmd, args, 500),
});

function script(dir: string, name: string, body: string, mode = 0o755): string {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, mode);
  return p;
}

const FAKE_VERSION =
  'echo "version: 0.2.0-dev (build 10587, commit 3f545becc)" >&2; echo "built with GNU 12.2.0 for Linux x86_64" >&2';

function setup(dir: string, yaml: string): CoreServices {
  writeFileSync(join(dir, "config.yaml"), yaml);
  return new CoreServices({ configPath: "config.yaml", cwd: dir });
}

const byId = (r: Awaited<ReturnType<typeof runDoctor>>, id: string) => r.checks.find((c) => c.id === id)!;

describe("doctor", () => {
  // docs/plan.md "Which GPUs": the probe is handed the configured llama-server to ask.
  test("a GPU the configured llama-server cannot use is a warning that names a build that can", async () => {
    using dir = tmpdir();
    const binary = script(dir.path, "llama-server", FAKE_VERSION);
    writeGguf(dir.path, "m.gguf", llama7b());
    const asked: (string | undefined)[] = [];
    const unused = "NVIDIA GeForce RTX 4090 is not used: llama-server lists no GPU device";
    const r = await runDoctor(
      setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n"),
      {
        ...deps(),
        probe: async (b) => {
          asked.push(b);
          return { ...HW, gpus_unused: [unused] };
        },
      },
    );
    expect(asked).toEqual([binary]);
    expect(byId(r, "hardware")).toMatchObject({ status: "warn", message: expect.stringContaining(unused) });
    expect(byId(r, "hardware").fix).toContain("CUDA or Vulkan for NVIDIA");
  });

  test("a healthy setup passes every check and reports the version", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    writeGguf(dir.path, "m.gguf", llama7b());
    const core = setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n");
    const r = await runDoctor(core, deps());
    expect(r.checks.map((c) => [c.id, c.status])).toEqual([
      ["config", "ok"],
      ["binary", "ok"],
      ["model", "ok"],
      ["hardware", "ok"],
      ["data_dir", "ok"],
      ["run_records", "ok"],
      ["store", "ok"],
      ["plan", "ok"],
    ]);
    expect(r.ok).toBe(true);
    expect(byId(r, "binary").data?.version).toBe("0.2.0-dev (build 10587, commit 3f545becc)");
    expect(renderDoctor(r)).toContain("No failures");
    expect(renderDoctor(r)).not.toContain("\u001b[");
    expect(renderDoctor(r, true)).toContain("\u001b[");
  });

  test("a GGUF's architecture never drives the terminal: the model check quotes it escaped", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    const spec = llama7b();
    spec.metadata["general.architecture"] = "\u001b]0;owned\u0007x";
    writeGguf(dir.path, "m.gguf", spec);
    const core = setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n");
    const r = await runDoctor(core, deps());
    expect(byId(r, "model").message).toContain("\u001b]0;owned");
    const text = renderDoctor(r, true);
    expect(text.replaceAll(/\u001b\[[0-9;]*m/g, "")).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(text).toContain("\\u{1b}]0;owned\\u{7}x");
  });

  test("missing binary, truncated model: both fail with fixes, plan not checked", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", { ...llama7b(), truncateBy: 4096 });
    const core = setup(dir.path, "llama:\n  binary: ./nope\nmodel:\n  path: ./m.gguf\n");
    const r = await runDoctor(core, deps());
    expect(r.ok).toBe(false);
    expect(byId(r, "binary")).toMatchObject({ status: "fail" });
    expect(byId(r, "binary").message).toContain("not found");
    expect(byId(r, "model")).toMatchObject({ status: "fail" });
    expect(byId(r, "model").message).toContain("truncated");
    expect(byId(r, "model").fix).toContain("download");
    // Not checked without a model: a skip, so the one cause is counted once.
    expect(byId(r, "plan").status).toBe("skip");
    expect(renderDoctor(r)).toContain("FAIL");
  });

  test("non-executable binary, random bytes named .gguf", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION, 0o644);
    writeFileSync(join(dir.path, "m.gguf"), crypto.getRandomValues(new Uint8Array(2048)));
    const core = setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n");
    const r = await runDoctor(core, deps());
    expect(byId(r, "binary").message).toContain("not executable");
    expect(byId(r, "model").message).toContain("not a GGUF");
  });

  test("the fix for a non-executable binary is a command a shell reads as meant, its path quoted", async () => {
    // `chmod +x /home/u/My Apps/llama-server` pasted changed /home/u/My and ./Apps/llama-server.
    using dir = tmpdir();
    script(dir.path, "llama server", FAKE_VERSION, 0o644);
    const core = setup(dir.path, "llama:\n  binary: ./llama server\n");
    const r = await runDoctor(core, deps());
    expect(byId(r, "binary").fix).toBe(`chmod +x '${join(dir.path, "llama server")}'`);
  });

  test("a binary that hangs on --version or prints garbage fails, without hanging doctor", async () => {
    using dir = tmpdir();
    script(dir.path, "hang", "sleep 30");
    script(dir.path, "junk", "echo '\u0001\u0002 zzz'");
    writeGguf(dir.path, "m.gguf", llama7b());
    const hang = await runDoctor(
      setup(dir.path, "llama:\n  binary: ./hang\nmodel:\n  path: ./m.gguf\n"),
      deps(),
    );
    expect(byId(hang, "binary").message).toContain("did not answer --version");
    const junk = await runDoctor(
      setup(dir.path, "llama:\n  binary: ./junk\nmodel:\n  path: ./m.gguf\n"),
      deps(),
    );
    expect(byId(junk, "binary").message).toContain("without a llama-server version");
  });

  test("unwritable data dir (under a regular file) and unresolvable MCP command fail", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    writeGguf(dir.path, "m.gguf", llama7b());
    writeFileSync(join(dir.path, "afile"), "x");
    script(dir.path, "mcp-ok", "true");
    const core = setup(
      dir.path,
      [
        "app:\n  data_dir: ./afile/data",
        "llama:\n  binary: ./llama-server",
        "model:\n  path: ./m.gguf",
        "mcp_servers:\n  - name: good\n    command: ./mcp-ok\n  - name: bad\n    command: no-such-mcp-server-xyz",
      ].join("\n"),
    );
    const r = await runDoctor(core, deps());
    expect(byId(r, "data_dir")).toMatchObject({ status: "fail" });
    expect(byId(r, "data_dir").message).toContain("not writable");
    expect(byId(r, "mcp:good").status).toBe("ok");
    expect(byId(r, "mcp:bad")).toMatchObject({ status: "fail" });
    expect(byId(r, "mcp:bad").message).toContain("not on PATH");
  });

  test("hung GPU driver warns; unknown architecture warns; model too big fails the plan", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    writeGguf(
      dir.path,
      "u.gguf",
      denseModel({
        arch: "zorb",
        layers: 2,
        embd: 64,
        heads: 4,
        kvHeads: 2,
        ff: 128,
        vocab: 100,
        ctx: 2048,
        type: 1,
      }),
    );
    writeGguf(dir.path, "m.gguf", llama7b());
    const hung: HardwareSnapshot = {
      ...HW,
      probes: [
        {
          id: "nvidia-smi",
          status: "timeout",
          message: "nvidia-smi did not answer within 2000 ms",
          ms: 2000,
        },
      ],
    };
    const r = await runDoctor(
      setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./u.gguf\n"),
      deps(hung),
    );
    expect(byId(r, "hardware")).toMatchObject({ status: "warn" });
    expect(byId(r, "hardware").message).toContain("did not answer");
    expect(byId(r, "model")).toMatchObject({ status: "warn" });
    const tiny: HardwareSnapshot = { ...HW, ram: { total_bytes: 2 * GIB, available_bytes: 1 * GIB } };
    const big = await runDoctor(
      setup(dir.path, "llama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n"),
      deps(tiny),
    );
    expect(byId(big, "plan")).toMatchObject({ status: "fail" });
    expect(byId(big, "plan").message).toMatch(/needs .* [GM]iB but has/);
    expect(big.ok).toBe(false);
  });

  test("no config: one failure, what depends on the config is skipped, nothing is created", async () => {
    using dir = tmpdir();
    const core = new CoreServices({ configPath: "missing.yaml", cwd: dir.path });
    const r = await runDoctor(core, deps());
    expect(r.checks.map((c) => [c.id, c.status])).toEqual([
      ["config", "fail"],
      ["binary", "skip"],
      ["model", "skip"],
      ["hardware", "ok"],
      ["data_dir", "skip"],
      ["store", "skip"],
      ["plan", "skip"],
    ]);
    expect(r.ok).toBe(false);
    expect(byId(r, "binary").message).toContain("config");
    expect(readdirSync(dir.path)).toEqual([]);
    const text = renderDoctor(r);
    expect(text).toContain("1 check failed (5 not checked).");
    expect(text).toMatch(/\[skip\] binary/);
  });

  test("an invalid config is one failure too, not three", async () => {
    using dir = tmpdir();
    const r = await runDoctor(setup(dir.path, "llama:\n  parallel: many\n"), deps());
    expect(byId(r, "config")).toMatchObject({ status: "fail", data: { code: "config_invalid" } });
    expect(r.checks.filter((c) => c.status === "fail").map((c) => c.id)).toEqual(["config"]);
    expect(byId(r, "model").status).toBe("skip");
    expect(DoctorResultSchema.parse(r)).toEqual(r);
  });

  test("the config fix names a key only when the message does", async () => {
    using dir = tmpdir();
    const fixOf = async (yaml: string) => byId(await runDoctor(setup(dir.path, yaml), deps()), "config").fix;
    expect(await fixOf("llama:\n  parallel: many\n")).toBe("correct the key named in the message");
    // A YAML syntax error has a line and no key.
    expect(await fixOf("app:\n  max_steps: [1\n")).toContain("at the line named in the message");
    // A folder given as the config has neither.
    const folder = await runDoctor(new CoreServices({ configPath: ".", cwd: dir.path }), deps());
    expect(byId(folder, "config").message).toContain("is a directory");
    expect(byId(folder, "config").fix).not.toContain("key");
  });

  test("the data_dir check probes without creating: missing folders are fine under a writable one", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    writeGguf(dir.path, "m.gguf", llama7b());
    const core = setup(
      dir.path,
      "app:\n  data_dir: ./not/yet/data\nllama:\n  binary: ./llama-server\nmodel:\n  path: ./m.gguf\n",
    );
    const r = await runDoctor(core, deps());
    expect(byId(r, "data_dir")).toMatchObject({ status: "ok" });
    expect(byId(r, "data_dir").message).toContain("will be created");
    expect(existsSync(join(dir.path, "not"))).toBe(false);
  });

  test("a data_dir that is a file, or under one, names the path and the problem", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "afile"), "x");
    for (const dataDir of ["./afile", "./afile/deeper/data"]) {
      const core = setup(dir.path, `app:\n  data_dir: ${dataDir}\n`);
      const check = byId(await runDoctor(core, deps()), "data_dir");
      expect(check.status).toBe("fail");
      expect(check.message).toContain(join(dir.path, "afile"));
      expect(check.message).toContain("not a folder");
      expect(check.data).toMatchObject({ path: join(dir.path, dataDir), problem: "ENOTDIR" });
    }
  });

  test("a refused KV cache type: the fix names the key to change, not 'a smaller model'", async () => {
    using dir = tmpdir();
    script(dir.path, "llama-server", FAKE_VERSION);
    // Head size 64 / 4 heads = 16: q8_0's block of 32 does not divide it.
    writeGguf(
      dir.path,
      "small.gguf",
      denseModel({
        arch: "llama",
        layers: 2,
        embd: 64,
        heads: 4,
        kvHeads: 2,
        ff: 128,
        vocab: 100,
        ctx: 2048,
        type: 1,
      }),
    );
    const core = setup(
      dir.path,
      "llama:\n  binary: ./llama-server\n  cache_type_k: q8_0\nmodel:\n  path: ./small.gguf\n",
    );
    const plan = byId(await runDoctor(core, deps()), "plan");
    expect(plan).toMatchObject({
      status: "fail",
      data: { code: "model_plan_error", key: "llama.cache_type_k" },
    });
    expect(plan.fix).toContain("llama.cache_type_k");
    expect(plan.fix).toContain("f16");
    expect(plan.fix).not.toContain("smaller model");
  });
});

describe("mcp: a command written as a whole command line", () => {
  // `command: "npx -y server --api-key sk-…"` (the args written into it, a common slip): the
  // failed check quoted it whole, the key with it, in the report people paste into issues.
  test.each([
    ["npx-not-here -y server --api-key sk-cmd-0123456789abc"],
    ["./not-here/server --token=sk-cmd-0123456789abc"],
    ["uvx-not-here server https://ann:sk-cmd-0123456789abc@db.local/x"],
  ])("%s: the check names the command, its credentials redacted", (command) => {
    const loaded = parseConfigText(
      `mcp_servers:\n  - name: m\n    command: "${command}"\n`,
      "/c/config.yaml",
    );
    const [check] = mcpChecks(loaded.config);
    expect(check).toMatchObject({ id: "mcp:m", status: "fail" });
    expect(check?.message).toContain("not-here");
    expect(check?.message).toContain("[redacted]");
    expect(JSON.stringify(check)).not.toContain("0123456789abc");
  });
});
