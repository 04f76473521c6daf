/**
 * The llama-server a release bundle carries: from a llama.cpp release archive (.tar.gz, .zip, as
 * published on its GitHub releases), an extracted release or build folder, or a lone
 * executable, all supplied by the packager (nothing is downloaded). What is taken: llama-server,
 * the shared libraries beside it (llama.cpp's releases load their CPU and GPU backends from
 * there), and llama.cpp's LICENSE (its MIT licence asks for the notice to travel with copies).
 * The other tools of a release (llama-cli, llama-bench, …) stay out.
 */
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { checkExecutableFor } from "./executable-format.ts";

export interface BundleTarget {
  os: "linux" | "darwin" | "windows";
  arch: string;
}

/** One file to put in the bundle: copied from `from`, or a relative symlink to `link`. */
export interface BundleEntry {
  name: string;
  from: string;
  link?: string;
}

export interface LlamaServerFiles {
  /** What the packager passed (an archive, a folder or a file), for the bundle's README. */
  source: string;
  entries: BundleEntry[];
}

const ARCHIVE = /\.(zip|tar\.gz|tgz|tar\.xz|txz|tar)$/i;

/**
 * Finds llama-server and what travels with it in `source`, extracting an archive under
 * `workDir`; throws with what to fix when there is none, or one for another target.
 */
export function llamaServerFiles(source: string, target: BundleTarget, workDir: string): LlamaServerFiles {
  const exe = target.os === "windows" ? "llama-server.exe" : "llama-server";
  let root = source;
  if (statSync(source).isFile()) {
    if (!ARCHIVE.test(source)) {
      assertExecutable(source, target);
      return { source, entries: [{ name: exe, from: source }] };
    }
    mkdirSync(workDir, { recursive: true });
    // A folder of its own per archive: files of another archive must not join this one.
    root = mkdtempSync(join(workDir, `llama-${target.os}-${target.arch}-`));
    extract(source, root);
  }
  const found = findFiles(root, exe, 4);
  if (found.length === 0) {
    const other = findFiles(root, target.os === "windows" ? "llama-server" : "llama-server.exe", 4);
    const hint = other.length > 0 ? `: it holds ${basename(other[0]!)}, a build for another OS` : "";
    throw new Error(`${source} holds no ${exe} for ${target.os}-${target.arch}${hint}`);
  }
  if (found.length > 1) {
    throw new Error(`${source} holds several ${exe}: ${found.map((f) => relative(root, f)).join(", ")}`);
  }
  const server = found[0]!;
  assertExecutable(server, target);
  return { source, entries: companions(dirname(server), exe, target.os) };
}

function assertExecutable(path: string, target: BundleTarget): void {
  const problem = checkExecutableFor(path, target.os, target.arch);
  if (problem) throw new Error(`--llama-server for ${target.os}-${target.arch}: ${problem}`);
}

/** Whether a file name is a shared library of this OS (versioned .so names included). */
export function isSharedLibrary(name: string, os: BundleTarget["os"]): boolean {
  if (os === "windows") return /\.dll$/i.test(name);
  if (os === "darwin") return /\.dylib$/.test(name);
  return /\.so(\.\d+)*$/.test(name);
}

/** llama-server, the libraries and licence beside it; symlinks kept when they point among them. */
function companions(dir: string, exe: string, os: BundleTarget["os"]): BundleEntry[] {
  const taken = readdirSync(dir).filter(
    (name) =>
      name === exe ||
      isSharedLibrary(name, os) ||
      // Metal shaders, for builds that do not embed them in the library.
      (os === "darwin" && /\.(metal|metallib)$/.test(name)) ||
      name === "LICENSE",
  );
  const names = new Set(taken);
  const entries: BundleEntry[] = [];
  for (const name of taken.sort()) {
    const from = join(dir, name);
    // LICENSE alone would read as local-ai's own.
    const as = name === "LICENSE" ? "LICENSE-llama.cpp" : name;
    if (lstatSync(from).isSymbolicLink()) {
      const link = readlinkSync(from);
      // libggml.so -> libggml.so.0 -> libggml.so.0.9.4: keep the chain, not three copies.
      if (!link.includes("/") && !link.includes("\\") && names.has(link)) {
        entries.push({ name: as, from, link });
        continue;
      }
      if (!existsSync(from)) continue; // a dangling link carries nothing
    }
    if (statSync(from).isFile()) entries.push({ name: as, from });
  }
  return entries;
}

/** Paths named `name` under `root`, at most `depth` folders down. */
function findFiles(root: string, name: string, depth: number): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const path = join(root, entry.name);
    if (entry.name === name && (entry.isFile() || entry.isSymbolicLink())) out.push(path);
    else if (entry.isDirectory() && depth > 0) out.push(...findFiles(path, name, depth - 1));
  }
  return out;
}

function extract(archive: string, into: string): void {
  const lower = archive.toLowerCase();
  if (lower.endsWith(".zip")) {
    // GNU tar cannot read zip; Windows' tar.exe (bsdtar) can, where unzip is missing.
    if (Bun.which("unzip")) run(["unzip", "-q", "-o", archive, "-d", into]);
    else run(["tar", "-xf", archive, "-C", into]);
  } else {
    const flag = /\.(tar\.gz|tgz)$/.test(lower) ? "-xzf" : /\.(tar\.xz|txz)$/.test(lower) ? "-xJf" : "-xf";
    run(["tar", flag, archive, "-C", into]);
  }
}

function run(cmd: string[]): void {
  if (!Bun.which(cmd[0]!))
    throw new Error(`${cmd[0]} is needed to extract llama.cpp archives but is not on PATH`);
  const proc = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${proc.stderr.toString().trim()}`);
}
