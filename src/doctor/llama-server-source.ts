/**
 * Where official llama-server builds come from: llama.cpp's GitHub releases, one archive per
 * OS, CPU and GPU backend. Used by doctor's fix for a missing llama-server and by the release
 * bundles' README (scripts/release.ts), so both name the same assets.
 *
 * The asset names follow llama.cpp's release workflow (.github/workflows/release.yml):
 * `llama-<tag>-bin-<platform>.<ext>`, <tag> being the build number (b6000, …). Linux and macOS
 * archives hold one folder with llama-server and its shared libraries; Windows zips hold them
 * at the top level.
 */

import { targetName } from "../util/target-name.ts";

export const LLAMA_CPP_RELEASES_URL = "https://github.com/ggml-org/llama.cpp/releases";

/** The `<os>-<arch>` name the archives, the docs and the client share (os: darwin, linux, windows). */
export const targetOf: (platform: string, arch: string) => string = targetName;

/**
 * The release assets that hold a llama-server for a target, the plain CPU (or, on macOS,
 * Metal) build first; an empty list when llama.cpp publishes none.
 */
export function llamaCppAssets(target: string): string[] {
  switch (target) {
    case "linux-x64":
      return ["llama-<tag>-bin-ubuntu-x64.tar.gz", "llama-<tag>-bin-ubuntu-vulkan-x64.tar.gz"];
    case "linux-arm64":
      return ["llama-<tag>-bin-ubuntu-arm64.tar.gz", "llama-<tag>-bin-ubuntu-vulkan-arm64.tar.gz"];
    case "darwin-arm64":
      return ["llama-<tag>-bin-macos-arm64.tar.gz"];
    case "darwin-x64":
      return ["llama-<tag>-bin-macos-x64.tar.gz"];
    case "windows-x64":
      return [
        "llama-<tag>-bin-win-cpu-x64.zip",
        "llama-<tag>-bin-win-cuda-12.4-x64.zip",
        "llama-<tag>-bin-win-vulkan-x64.zip",
      ];
    case "windows-arm64":
      return ["llama-<tag>-bin-win-cpu-arm64.zip"];
    default:
      return [];
  }
}

/** The shared libraries that travel with llama-server on an OS, as a file pattern. */
export function sharedLibraryPattern(os: string): string {
  return os === "windows" ? "*.dll" : os === "darwin" ? "*.dylib" : "lib*.so*";
}

/**
 * doctor's fix for a missing llama-server: where an official build for this OS comes from and
 * how to put it beside local-ai (`execDir`, the folder the core looks in first).
 */
export function missingLlamaServerFix(platform: string, arch: string, execDir: string): string {
  const target = targetOf(platform, arch);
  const os = target.slice(0, target.indexOf("-"));
  const exe = os === "windows" ? "llama-server.exe" : "llama-server";
  const assets = llamaCppAssets(target);
  const where =
    assets.length > 0
      ? `download ${assets[0]} from ${LLAMA_CPP_RELEASES_URL}${assets.length > 1 ? ` (GPU builds: ${assets.slice(1).join(", ")})` : ""}`
      : `build llama.cpp for ${target} (${LLAMA_CPP_RELEASES_URL} has no build for it)`;
  return (
    `${where}, extract it, and copy ${exe} with its shared libraries (${sharedLibraryPattern(os)}) into ` +
    `${execDir}, next to local-ai; or set llama.binary in the config, or put llama-server on PATH`
  );
}
