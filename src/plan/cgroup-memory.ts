/**
 * Linux: the memory this process's control groups leave it. A container (Docker, Podman, a
 * Kubernetes pod) or a systemd unit with MemoryMax sees the whole machine's /proc/meminfo, and
 * a plan sized from it had llama-server killed by the cgroup's OOM killer at its first long
 * prompt. Each level from the process's group up to the root may hold a limit, the tightest wins.
 */

/** More levels than any real hierarchy: the walk up reads three files a level. */
const MAX_LEVELS = 32;

/** Above this a limit is none: cgroup v1's "unlimited" is 2^63 rounded down to a page. */
const NO_LIMIT = 2 ** 62;

interface Level {
  limit: string;
  usage: string;
  stat: string;
  /** memory.stat's key for the page cache the kernel reclaims before it kills. */
  inactive: string;
}

/** The folders that may hold a limit, nearest first, from /proc/self/cgroup's text. */
export function cgroupMemoryLevels(procSelfCgroup: string): Level[] {
  const levels: Level[] = [];
  for (const line of procSelfCgroup.split("\n")) {
    const [, controllers, path] = /^\d+:([^:]*):(\/.*)$/.exec(line.trim()) ?? [];
    if (controllers === undefined || path === undefined) continue;
    // v2's unified line is `0::/path`; v1's memory controller is its own hierarchy.
    const v2 = controllers === "";
    if (!v2 && !controllers.split(",").includes("memory")) continue;
    const root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const parts = path.split("/").filter((p) => p !== "" && p !== "." && p !== "..");
    for (let n = Math.min(parts.length, MAX_LEVELS); n >= 0; n--) {
      const dir = [root, ...parts.slice(0, n)].join("/");
      levels.push(
        v2
          ? {
              limit: `${dir}/memory.max`,
              usage: `${dir}/memory.current`,
              stat: `${dir}/memory.stat`,
              inactive: "inactive_file",
            }
          : {
              limit: `${dir}/memory.limit_in_bytes`,
              usage: `${dir}/memory.usage_in_bytes`,
              stat: `${dir}/memory.stat`,
              inactive: "total_inactive_file",
            },
      );
    }
  }
  return levels;
}

/** A file's whole number of bytes; `max`, garbage, negative or past NO_LIMIT: none. */
function bytesOf(text: string | null): number | null {
  const t = text?.trim() ?? "";
  if (!/^\d{1,20}$/.test(t)) return null;
  const n = Number(t);
  return n < NO_LIMIT ? n : null;
}

function statValue(stat: string | null, key: string): number {
  const m = stat ? new RegExp(`^${key} (\\d+)$`, "m").exec(stat) : null;
  return m ? Number(m[1]) : 0;
}

/**
 * The tightest limit over the levels and what it leaves: the limit less what the group holds
 * that the kernel will not reclaim (its use less inactive page cache). Null: no level limits.
 */
export async function cgroupMemory(
  read: (path: string) => Promise<string | null>,
): Promise<{ limit_bytes: number; available_bytes: number } | null> {
  const levels = cgroupMemoryLevels((await read("/proc/self/cgroup")) ?? "");
  const limits: number[] = [];
  const available: number[] = [];
  for (const level of levels) {
    const limit = bytesOf(await read(level.limit));
    if (limit === null) continue;
    const usage = bytesOf(await read(level.usage)) ?? 0;
    const held = Math.max(0, usage - statValue(await read(level.stat), level.inactive));
    limits.push(limit);
    available.push(Math.max(0, limit - held));
  }
  if (limits.length === 0) return null;
  return { limit_bytes: Math.min(...limits), available_bytes: Math.min(...available) };
}
