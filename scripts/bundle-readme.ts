/**
 * README.txt of a release bundle, for the person installing it: what is inside, how to check
 * and start it, where logs go. (The repository's README is for developers and stays out.)
 * Plain text, so it reads the same in Notepad as in a terminal.
 */
import {
  LLAMA_CPP_RELEASES_URL,
  llamaCppAssets,
  sharedLibraryPattern,
} from "../src/doctor/llama-server-source.ts";

export interface BundleReadmeInput {
  version: string;
  os: "linux" | "darwin" | "windows";
  arch: string;
  /** The bundled llama-server's source and file names; undefined when the bundle has none. */
  llamaServer?: { source: string; files: string[] };
}

export function bundleReadme(input: BundleReadmeInput): string {
  const { os, arch, version } = input;
  const win = os === "windows";
  const exe = win ? ".exe" : "";
  const run = win ? `.\\local-ai${exe}` : "./local-ai";
  const copy = win ? "copy config.example.yaml config.yaml" : "cp config.example.yaml config.yaml";
  const osName = { linux: "Linux", darwin: "macOS", windows: "Windows" }[os];
  const lines: string[] = [
    `local-ai ${version} for ${osName} ${arch} (${os}-${arch})`,
    "",
    "local-ai is the AI core that a desktop application starts in the background. It runs",
    "language models on this computer with llama.cpp's llama-server; nothing leaves the machine.",
    "",
    "WHAT IS INSIDE",
    "",
    `  local-ai${exe}`.padEnd(26) + "the core (one self-contained program)",
  ];
  if (input.llamaServer) {
    const libs = input.llamaServer.files.filter(
      (f) => f !== `llama-server${exe}` && !f.startsWith("LICENSE"),
    );
    lines.push(`  llama-server${exe}`.padEnd(26) + "llama.cpp's server, which runs the model");
    lines.push("".padEnd(26) + `(from ${input.llamaServer.source})`);
    if (libs.length > 0)
      lines.push(`  ${sharedLibraryPattern(os)}`.padEnd(26) + "its libraries: keep them beside it");
    if (input.llamaServer.files.includes("LICENSE-llama.cpp"))
      lines.push("  LICENSE-llama.cpp".padEnd(26) + "llama.cpp's licence (MIT)");
  }
  lines.push(
    "  config.example.yaml".padEnd(26) + "every setting, commented, with its default",
    "  README.txt".padEnd(26) + "this file",
    "  SHA256SUMS".padEnd(26) + "checksums of every file here",
    "",
  );
  if (!input.llamaServer) lines.push(...missingLlamaServer(os, arch, exe), "");
  lines.push(
    "SETTING UP",
    "",
    "  1. Keep the files of this folder together. local-ai looks for llama-server beside",
    "     itself first, so the two need no path between them.",
    `  2. ${copy}`,
    "     and set model.path in config.yaml to a GGUF model file. Relative paths in it resolve",
    "     against config.yaml's own folder. Keep config.yaml and the data folder somewhere",
    "     writable (a folder in your user profile), not in a read-only install folder.",
    "  3. Check the setup:",
    `       ${run} doctor --config config.yaml`,
    "     It lists every check (config, llama-server, model, hardware, data folder, plan) with",
    "     a fix for each one that fails, and exits with 1 when one does.",
    `       ${run} plan --config config.yaml      shows how the model will be run, and why`,
    "",
    "RUNNING",
    "",
    "  An application starts the core itself:",
    `       ${run} serve-stdio --config config.yaml`,
    "  and talks to it in JSON lines on its standard input and output. By hand, this answers",
    "  one line and exits:",
    win
      ? `       echo {"id":1,"method":"ping"} | ${run} serve-stdio --config config.yaml     (Command Prompt)`
      : `       echo '{"id":1,"method":"ping"}' | ${run} serve-stdio --config config.yaml`,
    "",
    "LOGS",
    "",
    "  local-ai writes its own log to standard error (the application decides where it goes;",
    "  logging.level in config.yaml, or LOCAL_AI_LOG_LEVEL=debug, sets how much). llama-server's",
    `  output is kept in ${win ? "data\\logs\\" : "data/logs/"}llama-server.log (app.data_dir in config.yaml, beside`,
    "  config.yaml by default), rotated at 5 MB into .1 and .2.",
    "",
    "CHECKING THE DOWNLOAD",
    "",
    win
      ? "  PowerShell: Get-FileHash -Algorithm SHA256 <file>, and compare with SHA256SUMS."
      : os === "darwin"
        ? "  shasum -a 256 -c SHA256SUMS     (in this folder)"
        : "  sha256sum -c SHA256SUMS         (in this folder)",
  );
  if (os === "darwin") {
    lines.push(
      "",
      "  A browser marks downloaded files as quarantined, and macOS then refuses unsigned",
      "  programs. For a build you trust: xattr -dr com.apple.quarantine .",
    );
  }
  if (win) {
    lines.push("", "  SmartScreen or an antivirus may hold back an unsigned program at first start.");
  }
  return `${lines.join("\n")}\n`;
}

function missingLlamaServer(os: BundleReadmeInput["os"], arch: string, exe: string): string[] {
  const assets = llamaCppAssets(`${os}-${arch}`);
  return [
    "LLAMA-SERVER MUST BE ADDED",
    "",
    "  This bundle does not include llama-server, which local-ai needs to run a model.",
    `  Download ${assets[0] ?? `a llama.cpp build for ${os}-${arch}`} from`,
    `  ${LLAMA_CPP_RELEASES_URL} (<tag> is the build number, e.g. b6000),`,
    `  extract it, and copy llama-server${exe} with its libraries (${sharedLibraryPattern(os)}) into this`,
    "  folder, beside local-ai. Or set llama.binary in config.yaml to where llama-server is.",
    ...(assets.length > 1 ? [`  GPU builds: ${assets.slice(1).join(", ")}.`] : []),
  ];
}
