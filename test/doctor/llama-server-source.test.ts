import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { binaryCheck } from "../../src/doctor/checks.ts";
import {
  LLAMA_CPP_RELEASES_URL,
  llamaCppAssets,
  missingLlamaServerFix,
  targetOf,
} from "../../src/doctor/llama-server-source.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("where llama-server comes from", () => {
  test("every shipped target names a llama.cpp release asset", () => {
    for (const t of ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "windows-x64"]) {
      const [first] = llamaCppAssets(t);
      expect(first).toMatch(/^llama-<tag>-bin-[a-z0-9.-]+\.(tar\.gz|zip)$/);
    }
    expect(llamaCppAssets("linux-x64")[0]).toBe("llama-<tag>-bin-ubuntu-x64.tar.gz");
    expect(llamaCppAssets("darwin-arm64")[0]).toBe("llama-<tag>-bin-macos-arm64.tar.gz");
    expect(llamaCppAssets("windows-x64")[0]).toBe("llama-<tag>-bin-win-cpu-x64.zip");
    expect(llamaCppAssets("freebsd-x64")).toEqual([]);
    expect(targetOf("win32", "x64")).toBe("windows-x64");
  });

  test("the fix names the releases page, this OS's asset, the libraries and the folder", () => {
    const linux = missingLlamaServerFix("linux", "x64", "/opt/app");
    expect(linux).toContain(LLAMA_CPP_RELEASES_URL);
    expect(linux).toContain("llama-<tag>-bin-ubuntu-x64.tar.gz");
    expect(linux).toContain(
      "copy llama-server with its shared libraries (lib*.so*) into /opt/app, next to local-ai",
    );
    const win = missingLlamaServerFix("win32", "x64", "C:\\app");
    expect(win).toContain("llama-<tag>-bin-win-cpu-x64.zip");
    expect(win).toContain("llama-server.exe with its shared libraries (*.dll)");
    expect(missingLlamaServerFix("darwin", "arm64", "/A")).toContain("(*.dylib)");
    expect(missingLlamaServerFix("freebsd", "x64", "/A")).toContain("build llama.cpp for freebsd-x64");
  });

  test("doctor's binary check gives that fix when llama-server is nowhere", async () => {
    await using dir = tmpdir();
    const { config } = parseConfigText("llama:\n  binary: ./no-llama-server\n", `${dir.path}/config.yaml`);
    const check = await binaryCheck(
      config,
      async () => ({ code: 0, stdout: "", stderr: "", timedOut: false }) as never,
    );
    expect(check.status).toBe("fail");
    expect(check.fix).toBe(missingLlamaServerFix(process.platform, process.arch, dirname(process.execPath)));
  });
  // doctor's report is JSON a host reads: half an emoji in it is a lone surrogate, a line a
  // strict JSON parser refuses whole.
  test("a binary that prints no version has its output quoted cut between characters", async () => {
    await using dir = tmpdir();
    const binary = join(dir.path, "not-llama");
    writeFileSync(binary, "");
    chmodSync(binary, 0o755);
    const { config } = parseConfigText(`llama:\n  binary: ${binary}\n`, `${dir.path}/config.yaml`);
    const stdout = `${"o".repeat(299)}😀 and more`;
    const check = await binaryCheck(
      config,
      async () => ({ kind: "exit", code: 1, stdout, stderr: "" }) as never,
    );
    expect(check.status).toBe("fail");
    const output = String((check.data as { output?: string }).output);
    expect(output).toStartWith("ooo");
    expect(output.isWellFormed()).toBe(true);
  });
});
