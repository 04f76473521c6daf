/**
 * Fake llama.cpp release archives shaped like the real ones (llama.cpp's
 * .github/workflows/release.yml): linux and macOS are `llama-<tag>-bin-{ubuntu,macos}-<arch>.tar.gz`
 * holding one folder `llama-<tag>/` with the tools, versioned shared libraries (symlink chains
 * on Linux) and LICENSE; Windows is `llama-<tag>-bin-win-cpu-<arch>.zip` with everything at the
 * top level. The executables are headers only: enough for the release's format check.
 */
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export type Os = "linux" | "darwin" | "windows";

/** The first bytes of an executable for `<os>-<arch>` (ELF, Mach-O or PE), padded. */
export function executableHeader(os: Os, arch: string, size = 256): Uint8Array {
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  if (os === "linux") {
    bytes.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
    view.setUint16(18, arch === "arm64" ? 0xb7 : 0x3e, true);
  } else if (os === "darwin") {
    bytes.set([0xcf, 0xfa, 0xed, 0xfe], 0);
    view.setUint32(4, arch === "arm64" ? 0x0100000c : 0x01000007, true);
  } else {
    bytes.set([0x4d, 0x5a], 0);
    view.setUint32(0x3c, 0x80, true);
    bytes.set([0x50, 0x45, 0, 0], 0x80);
    view.setUint16(0x84, arch === "arm64" ? 0xaa64 : 0x8664, true);
  }
  return bytes;
}

export function writeExecutable(path: string, os: Os, arch: string): string {
  writeFileSync(path, executableHeader(os, arch));
  chmodSync(path, 0o755);
  return path;
}

/** The file names a release of this OS holds (bundled ones and others). */
export function releaseLayout(os: Os) {
  if (os === "windows") {
    return {
      bundled: [
        "ggml-base.dll",
        "ggml-cpu-haswell.dll",
        "ggml-cpu-x64.dll",
        "ggml.dll",
        "libomp140.x86_64.dll",
        "llama-server.exe",
        "llama.dll",
      ],
      links: [] as string[],
      left: ["llama-cli.exe", "llama-bench.exe"],
    };
  }
  if (os === "darwin") {
    return {
      bundled: [
        "LICENSE-llama.cpp",
        "libggml-base.dylib",
        "libggml-cpu.dylib",
        "libggml-metal.dylib",
        "libllama.dylib",
        "llama-server",
      ],
      links: [] as string[],
      left: ["llama-cli", "llama-bench"],
    };
  }
  return {
    bundled: [
      "LICENSE-llama.cpp",
      "libggml-base.so.0.9.4",
      "libggml-cpu-haswell.so",
      "libggml-cpu-x64.so",
      "libllama.so.0.0.1",
      "llama-server",
    ],
    // Symlink chains, as CMake writes them and tar keeps them.
    links: ["libggml-base.so", "libggml-base.so.0", "libllama.so", "libllama.so.0"],
    left: ["llama-cli", "llama-bench"],
  };
}

/** Writes a fake release archive for `<os>-<arch>` into `dir`; returns its path. */
export function writeLlamaRelease(dir: string, os: Os, arch: string, tag = "b9999"): string {
  const work = join(dir, `work-${os}-${arch}`);
  const folder = os === "windows" ? work : join(work, `llama-${tag}`);
  mkdirSync(folder, { recursive: true });
  const layout = releaseLayout(os);
  for (const name of [...layout.bundled, ...layout.left]) {
    const real = name === "LICENSE-llama.cpp" ? "LICENSE" : name;
    if (real === "LICENSE") writeFileSync(join(folder, real), "MIT License\n\nCopyright (c) ggml authors\n");
    else writeExecutable(join(folder, real), os, arch);
  }
  if (os === "linux") {
    symlinkSync("libggml-base.so.0.9.4", join(folder, "libggml-base.so.0"));
    symlinkSync("libggml-base.so.0", join(folder, "libggml-base.so"));
    symlinkSync("libllama.so.0.0.1", join(folder, "libllama.so.0"));
    symlinkSync("libllama.so.0", join(folder, "libllama.so"));
  }
  const platform = os === "windows" ? `win-cpu-${arch}` : `${os === "darwin" ? "macos" : "ubuntu"}-${arch}`;
  const archive = join(dir, `llama-${tag}-bin-${platform}.${os === "windows" ? "zip" : "tar.gz"}`);
  const cmd =
    os === "windows" ? ["zip", "-q", "-r", "-y", archive, "."] : ["tar", "-czf", archive, `llama-${tag}`];
  const made = Bun.spawnSync(cmd, { cwd: work, stderr: "pipe" });
  if (made.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${made.stderr}`);
  return archive;
}
