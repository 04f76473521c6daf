import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";

/**
 * The memory readings' files: read at once where the kernel makes them as they are read. Each
 * asynchronous read was a file thread's round trip waiting behind whatever the loop ran, one after
 * another (meminfo, the cgroup's levels), and the device list, which follows the memory readings,
 * waited for all of them on a cold chat's way to its spawn (docs/performance.md).
 * Not /proc/cpuinfo: on some kernels it samples every CPU's clock as it is read.
 */
const KERNEL_MEMORY_TEXT = /^\/(?:proc\/meminfo$|proc\/self\/cgroup$|sys\/fs\/cgroup\/)/;

/**
 * File systems the kernel answers itself, with no daemon or drive behind them. Not FUSE: in an LXC
 * container with lxcfs (Proxmox's default), /proc/meminfo and at times /sys/fs/cgroup are its
 * daemon's files, and a stuck daemon held the core's one thread (ping and cancel unanswered).
 */
const KERNEL_FS = new Set(["proc", "sysfs", "cgroup", "cgroup2", "tmpfs"]);

type Mount = { point: string; type: string };

/** proc(5)'s octal escapes in a mountinfo field (space, tab, newline, backslash). */
function unescaped(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** A mount that can hold a memory file: one of their folders' ancestors, or within the cgroups'. */
function mayHold(point: string): boolean {
  if (point.startsWith("/sys/fs/cgroup/")) return true;
  return ["/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup"].some(
    (file) => point === "/" || file === point || file.startsWith(`${point}/`),
  );
}

/** The mounts that may hold a memory file: a host of thousands (snaps, pods) costs one scan. */
function mountsOf(mountinfo: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of mountinfo.split("\n")) {
    const fields = line.split(" ");
    const dash = fields.indexOf("-", 6);
    const point = fields[4];
    const type = fields[dash + 1];
    if (dash < 0 || point === undefined || type === undefined) continue;
    const at = unescaped(point);
    if (mayHold(at)) mounts.push({ point: at, type });
  }
  return mounts;
}

function typeIn(path: string, mounts: Mount[]): string | null {
  let best: Mount | undefined;
  for (const m of mounts) {
    const holds = m.point === "/" || path === m.point || path.startsWith(`${m.point}/`);
    // The later of two at one point is the one on top.
    if (holds && (!best || m.point.length >= best.point.length)) best = m;
  }
  return best?.type ?? null;
}

/** The file system type of the deepest mount holding `path`, from /proc/self/mountinfo's text. */
export function mountTypeOf(path: string, mountinfo: string): string | null {
  return typeIn(path, mountsOf(mountinfo));
}

export interface TextReads {
  sync(path: string): string;
  async(path: string): Promise<string>;
}

const fsReads: TextReads = {
  sync: (path) => readFileSync(path, "utf8"),
  async: (path) => readFile(path, "utf8"),
};

/**
 * The probe's `readText`: a memory reading's file on a kernel file system read at once, any other
 * through a file thread. The mounts are read once (the first such file), and where they cannot be
 * read every file goes through a file thread. Null for a file that cannot be read.
 */
export function kernelTextReader(
  mountinfo: () => string | null,
  reads: TextReads = fsReads,
): (path: string) => Promise<string | null> {
  let mounts: Mount[] | null | undefined;
  const atOnce = (path: string): boolean => {
    if (!KERNEL_MEMORY_TEXT.test(path)) return false;
    if (mounts === undefined) {
      const text = mountinfo();
      mounts = text === null ? null : mountsOf(text);
    }
    const type = mounts && typeIn(path, mounts);
    return !!type && KERNEL_FS.has(type);
  };
  return async (path) => {
    try {
      return atOnce(path) ? reads.sync(path) : await reads.async(path);
    } catch {
      return null;
    }
  };
}

/** /proc/self/mountinfo: procfs's own text, made by the kernel from its mount table. */
export function procMountinfo(): string | null {
  try {
    return readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return null;
  }
}
