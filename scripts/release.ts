/**
 * Release bundles: one archive per target, `local-ai-<version>-<os>-<arch>`, holding the
 * executable, config.example.yaml, a README.txt for the person installing it, and, when the
 * packager supplies one, llama-server with its shared libraries (scripts/llama-bundle.ts); a
 * SHA256SUMS inside each bundle covers its files, and one beside the archives covers them.
 *
 * Archives are made with the system's `tar` (tar.gz for linux/darwin) and `zip` (windows): every
 * build machine has them (Windows 10+ ships bsdtar as tar.exe, which also writes zip when `zip`
 * is absent), they keep the executable bit and symlinks, and they need no dependency.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  createReadStream,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { bundleReadme } from "./bundle-readme.ts";
import type { LlamaServerFiles } from "./llama-bundle.ts";

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
  /** llama-server and what travels with it (llamaServerFiles), when the bundle carries one. */
  llamaServer?: LlamaServerFiles;
  outDir: string;
}

/** The one naming scheme of archives, docs and the client: `<os>-<arch>`. */
export const targetName = (t: ReleaseTarget) => `${t.os}-${t.arch}`;

/** The repository files every bundle carries; throws naming any that is missing. */
export function releaseFiles(rootDir: string): { name: string; path: string }[] {
  const files = ["config.example.yaml"].map((name) => ({ name, path: join(rootDir, name) }));
  const missing = files.filter((f) => !existsSync(f.path)).map((f) => f.path);
  if (missing.length > 0) throw new Error(`release files missing: ${missing.join(", ")}`);
  return files;
}

/**
 * Which llama.cpp build goes into which target's bundle: `--release-config FILE` (JSON,
 * `{"llama_server": {"linux-x64": "path", …}}`, paths relative to the file), then
 * `--llama-server TARGET=PATH` options, which win. A path is a llama.cpp release archive, a
 * folder holding llama-server, or the executable itself.
 */
export function parseLlamaServers(argv: string[], known: string[], cwd = process.cwd()): Map<string, string> {
  const out = new Map<string, string>();
  const add = (target: string, path: string, from: string) => {
    if (!known.includes(target))
      throw new Error(`${from}: unknown target ${target} (targets: ${known.join(", ")})`);
    if (!existsSync(path)) throw new Error(`${from}: ${path} does not exist`);
    out.set(target, path);
  };
  const config = optionValues(argv, "--release-config");
  for (const file of config) {
    for (const [target, path] of Object.entries(readReleaseConfig(resolve(cwd, file))))
      add(target, resolve(dirname(resolve(cwd, file)), path), file);
  }
  for (const value of optionValues(argv, "--llama-server")) {
    const eq = value.indexOf("=");
    if (eq <= 0) throw new Error(`--llama-server expects TARGET=PATH (targets: ${known.join(", ")})`);
    add(value.slice(0, eq), resolve(cwd, value.slice(eq + 1)), "--llama-server");
  }
  return out;
}

function optionValues(argv: string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === name) values.push(argv[++i] ?? "");
    else if (arg.startsWith(`${name}=`)) values.push(arg.slice(name.length + 1));
  }
  return values;
}

function readReleaseConfig(file: string): Record<string, string> {
  if (!existsSync(file)) throw new Error(`--release-config: ${file} does not exist`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`--release-config: ${file} is not JSON: ${(err as Error).message}`);
  }
  const map = (parsed as { llama_server?: unknown } | null)?.llama_server;
  const valid =
    typeof map === "object" && map !== null && Object.values(map).every((v) => typeof v === "string");
  if (!valid) throw new Error(`--release-config: ${file} needs {"llama_server": {"<os>-<arch>": "path"}}`);
  return map as Record<string, string>;
}

/** Stages the bundle's folder, writes its README.txt and SHA256SUMS, archives it; returns the archive. */
export async function packageTarget(input: PackageInput): Promise<string> {
  const exe = input.target.os === "windows" ? ".exe" : "";
  const name = `local-ai-${input.version}-${targetName(input.target)}`;
  const stageRoot = join(input.outDir, ".stage");
  const stage = join(stageRoot, name);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });

  copyFile(input.executable, join(stage, `local-ai${exe}`), 0o755);
  for (const f of input.files) copyFile(f.path, join(stage, f.name), 0o644);
  for (const entry of input.llamaServer?.entries ?? []) {
    const to = join(stage, entry.name);
    if (existsSync(to)) throw new Error(`${entry.from} would replace the bundle's own ${entry.name}`);
    if (entry.link) symlinkSync(entry.link, to);
    else copyFile(entry.from, to, entry.name.startsWith("LICENSE") ? 0o644 : 0o755);
  }
  const readme = bundleReadme({
    version: input.version,
    os: input.target.os,
    arch: input.target.arch,
    llamaServer: input.llamaServer && {
      source: basename(input.llamaServer.source),
      files: input.llamaServer.entries.map((e) => e.name),
    },
  });
  writeFileSync(join(stage, "README.txt"), readme);
  await writeSha256Sums(stage, bundleFiles(stage));

  const archive = join(input.outDir, input.target.os === "windows" ? `${name}.zip` : `${name}.tar.gz`);
  rmSync(archive, { force: true });
  if (input.target.os === "windows") zipFolder(stageRoot, name, archive);
  else run(["tar", "-czf", archive, "-C", stageRoot, name], "tar");
  rmSync(stage, { recursive: true, force: true });
  return archive;
}

/** The regular files of a staged bundle (symlinks point at them), SHA256SUMS aside. */
function bundleFiles(stage: string): string[] {
  return readdirSync(stage)
    .filter((n) => n !== "SHA256SUMS" && !lstatSync(join(stage, n)).isSymbolicLink())
    .map((n) => join(stage, n));
}

/** Writes SHA256SUMS for the files (names relative to `outDir`, sorted) and returns its path. */
export async function writeSha256Sums(outDir: string, files: string[]): Promise<string> {
  const lines: string[] = [];
  for (const file of [...files].sort()) lines.push(`${await sha256File(file)}  ${basename(file)}`);
  const sums = join(outDir, "SHA256SUMS");
  writeFileSync(sums, `${lines.join("\n")}\n`);
  return sums;
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

function copyFile(from: string, to: string, mode: number): void {
  copyFileSync(from, to);
  chmodSync(to, mode);
}

function zipFolder(cwd: string, name: string, archive: string): void {
  // -y stores symlinks as links (llama.cpp's Windows builds have none; this keeps any as such).
  if (Bun.which("zip")) run(["zip", "-q", "-r", "-X", "-y", archive, name], "zip", cwd);
  else run(["tar", "-a", "-cf", archive, name], "tar (bsdtar zip)", cwd);
}

function run(cmd: string[], what: string, cwd?: string): void {
  if (!Bun.which(cmd[0]!)) throw new Error(`${what} is needed to make release archives but is not on PATH`);
  const proc = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${proc.stderr.toString().trim()}`);
}
