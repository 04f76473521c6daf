import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hostTarget } from "../../build.ts";
import {
  packageTarget,
  parseLlamaServers,
  releaseFiles,
  sha256File,
  writeSha256Sums,
} from "../../scripts/release.ts";
import { hostBinary } from "../client/host-binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const ROOT = join(import.meta.dir, "../..");

function listTar(archive: string): string[] {
  const out = Bun.spawnSync(["tar", "-tzf", archive], { stdout: "pipe" });
  expect(out.exitCode).toBe(0);
  return out.stdout.toString().trim().split("\n").sort();
}

/** README and config.example.yaml as a release takes them (a stand-in config while the repo has none). */
function releaseRoot(dir: string): string {
  const root = join(dir, "root");
  mkdirSync(root);
  writeFileSync(join(root, "README.md"), readFileSync(join(ROOT, "README.md")));
  const example = join(ROOT, "config.example.yaml");
  writeFileSync(
    join(root, "config.example.yaml"),
    existsSync(example) ? readFileSync(example) : "model:\n  path: ./models/model.gguf\n",
  );
  return root;
}

describe("release bundles", () => {
  test.skipIf(!Bun.which("tar"))(
    "the host target's archive holds the executable, config, README and llama-server, with SHA256SUMS",
    async () => {
      await using dir = tmpdir();
      const target = hostTarget();
      const llama = join(dir.path, "llama-server-build");
      writeFileSync(llama, "#!/bin/sh\necho fake llama-server\n");
      const outDir = join(dir.path, "release");
      mkdirSync(outDir);
      const archive = packageTarget({
        target,
        version: "9.9.9",
        executable: hostBinary(),
        files: releaseFiles(releaseRoot(dir.path)),
        llamaServer: llama,
        outDir,
      });
      const name = `local-ai-9.9.9-${target.os}-${target.arch}`;
      expect(archive).toBe(join(outDir, `${name}.tar.gz`));
      expect(listTar(archive)).toEqual(
        [
          `${name}/`,
          `${name}/README.md`,
          `${name}/config.example.yaml`,
          `${name}/llama-server`,
          `${name}/local-ai`,
        ].sort(),
      );

      const sums = await writeSha256Sums(outDir, [archive]);
      expect(readFileSync(sums, "utf8")).toBe(`${await sha256File(archive)}  ${name}.tar.gz\n`);
      if (Bun.which("sha256sum")) {
        expect(Bun.spawnSync(["sha256sum", "-c", "SHA256SUMS"], { cwd: outDir }).exitCode).toBe(0);
      }

      // Unpacked, the executables keep their executable bit and the core runs.
      const unpack = join(dir.path, "unpack");
      mkdirSync(unpack);
      expect(Bun.spawnSync(["tar", "-xzf", archive, "-C", unpack]).exitCode).toBe(0);
      expect(statSync(join(unpack, name, "llama-server")).mode & 0o111).not.toBe(0);
      const version = Bun.spawnSync([join(unpack, name, "local-ai"), "--version"], { stdout: "pipe" });
      expect(version.exitCode).toBe(0);
      expect(version.stdout.toString()).toContain("0.1.0");
    },
    120_000,
  );

  test.skipIf(!Bun.which("zip") || !Bun.which("unzip"))(
    "a windows target is a zip with .exe names",
    async () => {
      await using dir = tmpdir();
      const exe = join(dir.path, "fake.exe");
      writeFileSync(exe, "MZ");
      const llamaDir = join(dir.path, "llama-win");
      mkdirSync(llamaDir);
      writeFileSync(join(llamaDir, "llama-server.exe"), "MZ");
      writeFileSync(join(llamaDir, "ggml.dll"), "MZ");
      const outDir = join(dir.path, "release");
      mkdirSync(outDir);
      const archive = packageTarget({
        target: { os: "windows", arch: "x64" },
        version: "1.0.0",
        executable: exe,
        files: releaseFiles(releaseRoot(dir.path)),
        llamaServer: llamaDir,
        outDir,
      });
      expect(archive.endsWith("local-ai-1.0.0-windows-x64.zip")).toBe(true);
      const list = Bun.spawnSync(["unzip", "-Z1", archive], { stdout: "pipe" })
        .stdout.toString()
        .trim()
        .split("\n");
      const p = "local-ai-1.0.0-windows-x64/";
      expect(list.sort()).toEqual(
        [
          p,
          `${p}README.md`,
          `${p}config.example.yaml`,
          `${p}ggml.dll`,
          `${p}llama-server.exe`,
          `${p}local-ai.exe`,
        ].sort(),
      );
    },
  );

  test("missing release files and bad --llama-server options fail with what to fix", async () => {
    await using dir = tmpdir();
    expect(() => releaseFiles(dir.path)).toThrow(/config\.example\.yaml/);
    const known = ["linux-x64", "windows-x64"];
    expect(() => parseLlamaServers(["--llama-server", "linux-x64"], known)).toThrow(/TARGET=PATH/);
    expect(() => parseLlamaServers(["--llama-server", "plan9-x64=/x"], known)).toThrow(
      /unknown target plan9-x64/,
    );
    expect(() => parseLlamaServers(["--llama-server=linux-x64=/nonexistent"], known)).toThrow(
      /does not exist/,
    );
    const file = join(dir.path, "llama-server");
    writeFileSync(file, "");
    expect(parseLlamaServers(["--single", "--llama-server", `linux-x64=${file}`], known)).toEqual(
      new Map([["linux-x64", file]]),
    );
  });
});
