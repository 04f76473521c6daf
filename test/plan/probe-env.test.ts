import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runWithTimeout } from "../../src/plan/probe.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A probe (`llama-server --version` for doctor, nvidia-smi for the plan) is a child too: it gets
// the allowlist's variables, never the host's secrets (docs/supervisor.md, "The child's environment").
const onPosix = process.platform !== "win32";
const saved = { ...process.env };
afterEach(() => {
  for (const k of ["OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "LLAMA_ARG_CTX_SIZE", "CUDA_VISIBLE_DEVICES"])
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
});

describe.skipIf(!onPosix)("a probe's environment", () => {
  test("without an env given: the allowlist's variables, no secret, no LLAMA_ARG_*", async () => {
    using dir = tmpdir();
    const script = join(dir.path, "print-env");
    writeFileSync(script, "#!/bin/sh\nenv\n");
    chmodSync(script, 0o755);
    process.env.OPENAI_API_KEY = "sk-test-secret";
    process.env.AWS_SECRET_ACCESS_KEY = "aws-secret";
    process.env.LLAMA_ARG_CTX_SIZE = "77";
    process.env.CUDA_VISIBLE_DEVICES = "0";
    const r = await runWithTimeout(script, [], 5000);
    expect(r.kind).toBe("exit");
    const out = (r as { stdout: string }).stdout;
    expect(out).not.toContain("sk-test-secret");
    expect(out).not.toContain("aws-secret");
    expect(out).not.toContain("LLAMA_ARG_CTX_SIZE");
    expect(out).toContain("CUDA_VISIBLE_DEVICES=0");
    expect(out).toContain("PATH=");
    const given = await runWithTimeout(script, [], 5000, { ONLY: "this" });
    expect((given as { stdout: string }).stdout).toContain("ONLY=this");
  });
});

// The memory readings' kernel files are read at once, not through a file thread's round trip that
// waits behind the loop (docs/performance.md, "A cold chat's way to the spawn, again").
describe.skipIf(process.platform !== "linux")("the probe's kernel files (Linux only: /proc)", () => {
  test("/proc/meminfo is read before the loop's next turn; another file as before", async () => {
    const { realProbeEnv } = await import("../../src/plan/probe.ts");
    const order: string[] = [];
    setImmediate(() => order.push("next turn"));
    const meminfo = await realProbeEnv.readText("/proc/meminfo");
    order.push("meminfo");
    expect(meminfo).toContain("MemTotal:");
    expect(order).toEqual(["meminfo"]);
    using dir = tmpdir();
    const file = join(dir.path, "text");
    writeFileSync(file, "read all the same");
    expect(await realProbeEnv.readText(file)).toBe("read all the same");
    expect(await realProbeEnv.readText(join(dir.path, "missing"))).toBeNull();
  });
});
