/**
 * Release bundles: one archive per target holding the executable, config.example.yaml, the
 * README and, when given, a llama-server build, plus a SHA256SUMS file (sha256sum -c format).
 *
 * Archives are made with the system's `tar` (tar.gz for linux/darwin) and `zip` (windows): every
 * build machine has them (Windows 10+ ships bsdtar as tar.exe, which also writes zip when `zip`
 * is absent), they keep the executable bit, and they need no dependency.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";

export interface ReleaseTarget {
  os: "linux" | "darwin" | "windows";
  arch: string;
}

export interface PackageInput {
  target: ReleaseTarget;
  version: string;
  /** The compiled local-ai for this target. */
  executable: string;
  /** Files copied beside it, by name in the archive. */
  files: { name: string; path: string }[];
  /** A llama-server executable, or a folder holding it and its shared libraries. */
  llamaServer?: string;
  outDir: string;
}

export const targetName = (t: ReleaseTarget) => `${t.os}-${t.arch}`;

/** The repository files every bundle carries; throws naming any that is missing. */
export function releaseFiles(rootDir: string): { name: string; path: string }[] {
  const files = ["config.example.yaml", "README.md"].map((name) => ({ name, path: join(rootDir, name) }));
  const missing = files.filter((f) => !existsSync(f.path)).map((f) => f.path);
  if (missing.length > 0) throw new Error(`release files missing: ${missing.join(", ")}`);
  return files;
}

/** Parses repeated `--llama-server TARGET=PATH` options into a target → path map. */
export function parseLlamaServers(argv: string[], known: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let value: string | undefined;
    if (arg === "--llama-server") value = argv[++i];
    else if (arg.startsWith("--llama-server=")) value = arg.slice("--llama-server=".length);
    else continue;
    const eq = value?.indexOf("=") ?? -1;
    if (!value || eq <= 0)
      throw new Error(`--llama-server expects TARGET=PATH (targets: ${known.join(", ")})`);
    const target = value.slice(0, eq);
    const path = value.slice(eq + 1);
    if (!known.includes(target))
      throw new Error(`--llama-server: unknown target ${target} (targets: ${known.join(", ")})`);
    if (!existsSync(path)) throw new Error(`--llama-server: ${path} does not exist`);
    out.set(target, path);
  }
  return out;
}

/** Stages the bundle's folder and archives it; returns the archive's path. */
export function packageTarget(input: PackageInput): string {
  const exe = input.target.os === "windows" ? ".exe" : "";
  const name = `local-ai-${input.version}-${targetName(input.target)}`;
  const stageRoot = join(input.outDir, ".stage");
  const stage = join(stageRoot, name);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });

  copyExecutable(input.executable, join(stage, `local-ai${exe}`));
  for (const f of input.files) copyFileSync(f.path, join(stage, f.name));
  if (input.llamaServer) {
    if (statSync(input.llamaServer).isDirectory()) {
      // A llama.cpp release folder: llama-server with its shared libraries, kept flat beside
      // local-ai, where the core looks for it first.
      for (const entry of readdirSync(input.llamaServer, { withFileTypes: true })) {
        if (!entry.isFile() || existsSync(join(stage, entry.name))) continue;
        copyExecutable(join(input.llamaServer, entry.name), join(stage, entry.name));
      }
      if (!existsSync(join(stage, `llama-server${exe}`))) {
        throw new Error(`${input.llamaServer} holds no llama-server${exe}`);
      }
    } else {
      copyExecutable(input.llamaServer, join(stage, `llama-server${exe}`));
    }
  }

  const archive = join(input.outDir, input.target.os === "windows" ? `${name}.zip` : `${name}.tar.gz`);
  rmSync(archive, { force: true });
  if (input.target.os === "windows") zipFolder(stageRoot, name, archive);
  else run(["tar", "-czf", archive, "-C", stageRoot, name], "tar");
  rmSync(stage, { recursive: true, force: true });
  return archive;
}

/** Writes SHA256SUMS for the archives (names relative to its folder) and returns its path. */
export async function writeSha256Sums(outDir: string, archives: string[]): Promise<string> {
  const lines: string[] = [];
  for (const archive of [...archives].sort())
    lines.push(`${await sha256File(archive)}  ${basename(archive)}`);
  const file = join(outDir, "SHA256SUMS");
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

export function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}

function copyExecutable(from: string, to: string): void {
  copyFileSync(from, to);
  chmodSync(to, 0o755);
}

function zipFolder(cwd: string, name: string, archive: string): void {
  if (Bun.which("zip")) run(["zip", "-q", "-r", "-X", archive, name], "zip", cwd);
  else run(["tar", "-a", "-cf", archive, name], "tar (bsdtar zip)", cwd);
}

function run(cmd: string[], what: string, cwd?: string): void {
  if (!Bun.which(cmd[0]!)) throw new Error(`${what} is needed to make release archives but is not on PATH`);
  const proc = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${proc.stderr.toString().trim()}`);
}
