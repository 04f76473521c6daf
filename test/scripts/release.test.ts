import { describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { prepareLlamaServers, release } from "../../build.ts";
import { bundleReadme } from "../../scripts/bundle-readme.ts";
import { hostTarget, TARGETS } from "../../scripts/compile.ts";
import { llamaServerFiles } from "../../scripts/llama-bundle.ts";
import { packageTarget, parseLlamaServers, releaseFiles, targetName } from "../../scripts/release.ts";
import { hostBinary } from "../client/host-binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { releaseLayout, writeExecutable, writeLlamaRelease } from "./fake-llama-release.ts";

const ROOT = join(import.meta.dir, "../..");
const tools = ["tar", "zip", "unzip", "sha256sum"].every((t) => Bun.which(t));

function sh(cmd: string[], cwd?: string): string {
  const out = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  if (out.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${out.stderr}`);
  return out.stdout.toString();
}

/** Unpacks an archive into `into`; returns the bundle's folder. */
function unpack(archive: string, into: string): string {
  mkdirSync(into, { recursive: true });
  if (archive.endsWith(".zip")) sh(["unzip", "-q", archive, "-d", into]);
  else sh(["tar", "-xzf", archive, "-C", into]);
  const name = archive.slice(archive.lastIndexOf("/") + 1).replace(/\.(zip|tar\.gz)$/, "");
  return join(into, name);
}

const listing = (dir: string) => sh(["ls", "-A", dir]).trim().split("\n").sort();

describe("release bundles", () => {
  test.skipIf(!tools)(
    "five targets from llama.cpp release archives: llama-server and its libraries beside local-ai, SHA256SUMS inside and out",
    async () => {
      await using dir = tmpdir();
      const sources = new Map(TARGETS.map((t) => [targetName(t), writeLlamaRelease(dir.path, t.os, t.arch)]));
      const llamaServers = prepareLlamaServers(TARGETS, sources, join(dir.path, "work"));
      const outDir = join(dir.path, "release");
      const { archives, sums } = await release(TARGETS, {
        llamaServers,
        outDir,
        // Stand-ins for the compiled cores: packaging does not look inside them.
        executableFor: (t) => {
          const path = join(dir.path, `local-ai-${targetName(t)}`);
          writeFileSync(path, `local-ai for ${targetName(t)}\n`);
          return path;
        },
      });
      expect(archives.map((a) => a.slice(outDir.length + 1))).toEqual([
        "local-ai-0.1.0-linux-x64.tar.gz",
        "local-ai-0.1.0-linux-arm64.tar.gz",
        "local-ai-0.1.0-darwin-x64.tar.gz",
        "local-ai-0.1.0-darwin-arm64.tar.gz",
        "local-ai-0.1.0-windows-x64.zip",
      ]);
      expect(readFileSync(sums, "utf8").trim().split("\n")).toHaveLength(5);
      expect(sh(["sha256sum", "-c", "SHA256SUMS"], outDir)).toContain("local-ai-0.1.0-windows-x64.zip: OK");

      for (const [i, target] of TARGETS.entries()) {
        const bundle = unpack(archives[i]!, join(dir.path, "unpacked", targetName(target)));
        const exe = target.os === "windows" ? ".exe" : "";
        const layout = releaseLayout(target.os);
        expect(listing(bundle)).toEqual(
          [
            `local-ai${exe}`,
            "config.example.yaml",
            "README.txt",
            "SHA256SUMS",
            ...layout.bundled,
            ...layout.links,
          ].sort(),
        );
        // The other tools of a llama.cpp release stay out.
        for (const left of layout.left) expect(existsSync(join(bundle, left))).toBe(false);
        // Every file is in the bundle's own SHA256SUMS, and each checks out.
        const checked = sh(["sha256sum", "-c", "SHA256SUMS"], bundle);
        for (const name of [`local-ai${exe}`, `llama-server${exe}`, "README.txt", "config.example.yaml"])
          expect(checked).toContain(`${name}: OK`);
        expect(statSync(join(bundle, `llama-server${exe}`)).mode & 0o111).not.toBe(0);
        expect(readFileSync(join(bundle, "README.txt"), "utf8")).toContain(`llama-server${exe}`);
      }
      // Linux keeps the libraries' symlink chains as links, not copies.
      const linux = join(dir.path, "unpacked/linux-x64/local-ai-0.1.0-linux-x64");
      expect(lstatSync(join(linux, "libggml-base.so")).isSymbolicLink()).toBe(true);
      expect(readlinkSync(join(linux, "libggml-base.so"))).toBe("libggml-base.so.0");
      expect(readFileSync(join(linux, "LICENSE-llama.cpp"), "utf8")).toContain("MIT License");
    },
    120_000,
  );

  test.skipIf(!tools)(
    "the host bundle runs and its core finds llama-server beside itself",
    async () => {
      await using dir = tmpdir();
      const target = hostTarget();
      // A genuine executable of this OS and CPU stands in for llama-server.
      const folder = join(dir.path, "llama-build");
      mkdirSync(folder);
      const trueBin = Bun.which("true")!;
      writeFileSync(join(folder, "llama-server"), readFileSync(trueBin));
      const outDir = join(dir.path, "release");
      mkdirSync(outDir);
      const archive = await packageTarget({
        target,
        version: "9.9.9",
        executable: hostBinary(),
        files: releaseFiles(ROOT),
        llamaServer: llamaServerFiles(folder, target, join(dir.path, "work")),
        outDir,
      });
      const bundle = unpack(archive, join(dir.path, "unpacked"));
      const version = Bun.spawnSync([join(bundle, "local-ai"), "--version"], { stdout: "pipe" });
      expect(version.stdout.toString()).toContain("0.1.0");
      writeFileSync(join(bundle, "config.yaml"), "model:\n  path: ./none.gguf\n");
      const doctor = Bun.spawnSync([join(bundle, "local-ai"), "doctor", "--json"], {
        cwd: bundle,
        stdout: "pipe",
        stderr: "pipe",
      });
      const binary = JSON.parse(doctor.stdout.toString()).checks.find(
        (c: { id: string }) => c.id === "binary",
      );
      expect(binary.message).not.toContain("not found");
      expect(binary.data.path).toBe(join(bundle, "llama-server"));
    },
    60_000,
  );

  test.skipIf(!tools)(
    "without llama-server, the bundle's README says it must be added, and how",
    async () => {
      await using dir = tmpdir();
      const outDir = join(dir.path, "release");
      mkdirSync(outDir);
      const exe = join(dir.path, "local-ai.exe");
      writeExecutable(exe, "windows", "x64");
      const archive = await packageTarget({
        target: { os: "windows", arch: "x64" },
        version: "1.0.0",
        executable: exe,
        files: releaseFiles(ROOT),
        outDir,
      });
      const bundle = unpack(archive, join(dir.path, "unpacked"));
      expect(listing(bundle)).toEqual(
        ["README.txt", "SHA256SUMS", "config.example.yaml", "local-ai.exe"].sort(),
      );
      const readme = readFileSync(join(bundle, "README.txt"), "utf8");
      expect(readme).toContain("LLAMA-SERVER MUST BE ADDED");
      expect(readme).toContain("llama-<tag>-bin-win-cpu-x64.zip");
      expect(readme).toContain("https://github.com/ggml-org/llama.cpp/releases");
      expect(sh(["sha256sum", "-c", "SHA256SUMS"], bundle)).toContain("local-ai.exe: OK");
    },
  );

  test("the README is for the person installing: contents, doctor, logs, checksums, per OS", () => {
    const linux = bundleReadme({
      version: "1.2.3",
      os: "linux",
      arch: "x64",
      llamaServer: { source: "llama-b1-bin-ubuntu-x64.tar.gz", files: ["llama-server", "libllama.so"] },
    });
    expect(linux).toStartWith("local-ai 1.2.3 for Linux x64 (linux-x64)\n");
    expect(linux).toContain("./local-ai doctor --config config.yaml");
    expect(linux).toContain("data/logs/llama-server.log");
    expect(linux).toContain("sha256sum -c SHA256SUMS");
    expect(linux).not.toContain("MUST BE ADDED");
    expect(linux).not.toContain("npm");
    const mac = bundleReadme({ version: "1", os: "darwin", arch: "arm64" });
    expect(mac).toContain("shasum -a 256 -c SHA256SUMS");
    expect(mac).toContain("xattr -dr com.apple.quarantine");
    expect(mac).toContain("llama-<tag>-bin-macos-arm64.tar.gz");
    const win = bundleReadme({ version: "1", os: "windows", arch: "x64" });
    expect(win).toContain(".\\local-ai.exe doctor --config config.yaml");
    expect(win).toContain("copy config.example.yaml config.yaml");
  });

  test.skipIf(!tools)(
    "a llama.cpp build for another target, or none, is refused before anything is built",
    async () => {
      await using dir = tmpdir();
      const work = join(dir.path, "work");
      const linuxArm = writeLlamaRelease(dir.path, "linux", "arm64");
      expect(() => llamaServerFiles(linuxArm, { os: "linux", arch: "x64" }, work)).toThrow(
        /is a linux-arm64 executable, not linux-x64/,
      );
      expect(() => llamaServerFiles(linuxArm, { os: "windows", arch: "x64" }, work)).toThrow(
        /holds no llama-server\.exe for windows-x64: it holds llama-server, a build for another OS/,
      );
      const mac = writeLlamaRelease(dir.path, "darwin", "x64", "b1");
      expect(() => llamaServerFiles(mac, { os: "linux", arch: "x64" }, work)).toThrow(
        /is a darwin-x64 executable, not linux-x64/,
      );
      const script = join(dir.path, "llama-server");
      writeFileSync(script, "#!/bin/sh\necho hi\n");
      expect(() => llamaServerFiles(script, { os: "linux", arch: "x64" }, work)).toThrow(
        /is not an executable/,
      );
      const empty = join(dir.path, "empty");
      mkdirSync(empty);
      writeFileSync(join(empty, "README"), "");
      expect(() => llamaServerFiles(empty, { os: "linux", arch: "x64" }, work)).toThrow(
        /holds no llama-server/,
      );
    },
  );

  test("--release-config and --llama-server name each target's build; mistakes say what to fix", async () => {
    await using dir = tmpdir();
    const known = ["linux-x64", "windows-x64"];
    expect(() => releaseFiles(join(dir.path, "nowhere"))).toThrow(/config\.example\.yaml/);
    expect(() => parseLlamaServers(["--llama-server", "linux-x64"], known)).toThrow(/TARGET=PATH/);
    expect(() => parseLlamaServers(["--llama-server", "plan9-x64=/x"], known)).toThrow(
      /unknown target plan9-x64/,
    );
    expect(() => parseLlamaServers(["--llama-server=linux-x64=/nonexistent"], known)).toThrow(
      /does not exist/,
    );

    mkdirSync(join(dir.path, "downloads"));
    const linux = join(dir.path, "downloads/linux.tar.gz");
    const win = join(dir.path, "downloads/win.zip");
    writeFileSync(linux, "");
    writeFileSync(win, "");
    const config = join(dir.path, "release.json");
    writeFileSync(config, JSON.stringify({ llama_server: { "linux-x64": "downloads/linux.tar.gz" } }));
    // Paths in the file resolve against its folder; a flag for the same target wins.
    expect(parseLlamaServers(["--release-config", config], known, "/")).toEqual(
      new Map([["linux-x64", linux]]),
    );
    expect(
      parseLlamaServers([`--release-config=${config}`, "--llama-server", `linux-x64=${win}`], known, "/"),
    ).toEqual(new Map([["linux-x64", win]]));
    writeFileSync(config, JSON.stringify({ llama_server: { "linux-x64": 1 } }));
    expect(() => parseLlamaServers(["--release-config", config], known)).toThrow(/needs \{"llama_server"/);
    writeFileSync(config, "{");
    expect(() => parseLlamaServers(["--release-config", config], known)).toThrow(/is not JSON/);
  });
});

// The whole `npm run build:release` (five compiles, five archives of ~110 MB each): a minute or
// more, so opt-in: LOCAL_AI_TEST_FULL_RELEASE=1. It replaces this checkout's dist/.
const FULL = process.env.LOCAL_AI_TEST_FULL_RELEASE === "1";
describe.skipIf(!FULL || !tools)("npm run build:release, every target", () => {
  test("with fake llama.cpp archives: five archives with llama-server, sha256sum -c passes", async () => {
    await using dir = tmpdir();
    const config: Record<string, string> = {};
    for (const t of TARGETS) config[targetName(t)] = writeLlamaRelease(dir.path, t.os, t.arch);
    writeFileSync(join(dir.path, "release.json"), JSON.stringify({ llama_server: config }));
    const build = Bun.spawnSync(
      ["npm", "run", "build:release", "--", "--release-config", join(dir.path, "release.json")],
      {
        cwd: ROOT,
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    expect(build.stderr.toString()).not.toContain("build.ts:");
    expect(build.exitCode).toBe(0);
    const out = join(ROOT, "dist/release");
    expect(sh(["sha256sum", "-c", "SHA256SUMS"], out).trim().split("\n")).toHaveLength(5);
    for (const t of TARGETS) {
      const exe = t.os === "windows" ? ".exe" : "";
      const archive = join(out, `local-ai-0.1.0-${targetName(t)}.${t.os === "windows" ? "zip" : "tar.gz"}`);
      const bundle = unpack(archive, join(dir.path, "unpacked", targetName(t)));
      expect(existsSync(join(bundle, `llama-server${exe}`))).toBe(true);
      expect(sh(["sha256sum", "-c", "SHA256SUMS"], bundle)).toContain(`local-ai${exe}: OK`);
    }
  }, 600_000);
});
