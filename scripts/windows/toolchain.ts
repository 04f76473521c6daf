import { existsSync, mkdirSync } from "node:fs";
import { isAbsolute, join } from "node:path";

/**
 * The Linux side of the Windows suite: Debian's Wine 8 and mingw, found or installed, the
 * bcryptprimitives.dll stand-in built with them (scripts/wine/), and Wine processes run in the
 * suite's own prefix. Nothing here is needed by the product; it only lets this Linux machine run
 * the Windows build.
 */

export interface Toolchain {
  wine: string;
  wineserver: string;
  gcc: string;
}

export const PACKAGES = ["wine64", "gcc-mingw-w64-x86-64"];
const SHIM = join(import.meta.dir, "..", "wine");

function which(names: string[]): string | null {
  for (const name of names) {
    const found = name.startsWith("/") ? (existsSync(name) ? name : null) : Bun.which(name);
    if (found) return found;
  }
  return null;
}

export function findToolchain(): Toolchain | null {
  // Debian puts the 64-bit loader in /usr/lib/wine and `wine64` on PATH only with wine64-tools.
  const wine = which(["/usr/lib/wine/wine64", "wine64"]);
  const wineserver = which(["/usr/lib/wine/wineserver", "wineserver"]);
  const gcc = which(["x86_64-w64-mingw32-gcc"]);
  return wine && wineserver && gcc ? { wine, wineserver, gcc } : null;
}

/**
 * Installs the packages with apt-get when this user may (root); otherwise says what to run.
 * Returns why it could not, or null once the toolchain is there.
 */
export function installToolchain(log: (line: string) => void): string | null {
  const command = `apt-get install -y ${PACKAGES.join(" ")}`;
  const aptGet = Bun.which("apt-get");
  if (!aptGet)
    return `Wine and mingw are missing and there is no apt-get here; install ${PACKAGES.join(" and ")}`;
  if (process.getuid?.() !== 0) return `Wine and mingw are missing; run \`sudo ${command}\` first`;
  log(`installing ${PACKAGES.join(" ")} (${command}) …`);
  const install = () =>
    Bun.spawnSync([aptGet, "install", "-y", ...PACKAGES], {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      stdout: "ignore",
      stderr: "pipe",
    });
  let r = install();
  if (r.exitCode !== 0) {
    // A fresh machine may have no package lists yet.
    Bun.spawnSync([aptGet, "update"], { stdout: "ignore", stderr: "ignore" });
    r = install();
  }
  if (r.exitCode !== 0 || !findToolchain())
    return `\`${command}\` failed: ${r.stderr.toString().trim().split("\n").slice(-2).join(" ")}`;
  return null;
}

/** Builds bcryptprimitives.dll into `dir`, beside the Windows executables that need it. */
export function buildShim(tc: Toolchain, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const out = join(dir, "bcryptprimitives.dll");
  const args = [
    "-shared",
    "-O2",
    "-o",
    out,
    join(SHIM, "bcryptprimitives.c"),
    join(SHIM, "bcryptprimitives.def"),
  ];
  const r = Bun.spawnSync([tc.gcc, ...args, "-ladvapi32"], { stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`mingw could not build the shim: ${r.stderr.toString().trim()}`);
  return out;
}

/** A Linux path as Wine's programs see it: the Linux root is drive Z:. */
export function windowsPath(linuxPath: string): string {
  if (!isAbsolute(linuxPath)) throw new Error(`not an absolute path: ${linuxPath}`);
  return `Z:${linuxPath.replaceAll("/", "\\")}`;
}

export function wineEnv(prefix: string): Record<string, string> {
  // No debug channels: Wine's fixme lines would drown the host's stderr.
  return { ...(process.env as Record<string, string>), WINEPREFIX: prefix, WINEDEBUG: "-all" };
}

/** Creates the prefix on first use (about 20 s); later runs reuse it. */
export function bootPrefix(tc: Toolchain, prefix: string): void {
  if (existsSync(join(prefix, "system.reg"))) return;
  mkdirSync(prefix, { recursive: true });
  const r = Bun.spawnSync([tc.wine, "wineboot", "-i"], {
    env: wineEnv(prefix),
    stdout: "ignore",
    stderr: "pipe",
  });
  if (!existsSync(join(prefix, "system.reg")))
    throw new Error(`wineboot could not create ${prefix}: ${r.stderr.toString().trim().slice(-500)}`);
  Bun.spawnSync([tc.wineserver, "-w"], { env: wineEnv(prefix) });
}

/** Ends every process of the suite's prefix (all of them were started by this run). */
export function endPrefix(tc: Toolchain, prefix: string): void {
  Bun.spawnSync([tc.wineserver, "-k"], { env: wineEnv(prefix), stdout: "ignore", stderr: "ignore" });
}

/**
 * Wine processes of this run still running: their Linux command line names the Windows path
 * of the run's folders. `ps` sees them as ordinary processes.
 */
export function runningFrom(folders: string[], names: RegExp): string[] {
  const r = Bun.spawnSync(["ps", "-eo", "pid=,args="], { stdout: "pipe" });
  const marks = folders.flatMap((f) => [f, windowsPath(f)]).map((m) => m.toLowerCase());
  return r.stdout
    .toString()
    .split("\n")
    .filter((line) => names.test(line) && marks.some((m) => line.toLowerCase().includes(m)));
}
