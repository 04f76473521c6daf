import { createHash } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/**
 * Which processes a pid names, as a short id: two cores that share it see each other's pids,
 * two that do not (two containers, two machines on one network folder) cannot judge each other's
 * by `kill(pid, 0)`: "no such process" here says nothing of a holder there. The host's name and,
 * on Linux, its boot (/proc/sys/kernel/random/boot_id: a pid namespace's number is reused after a
 * reboot) and this process's pid namespace (/proc/self/ns/pid). Recorded with a session lease
 * (store/session-lease.ts), a download lock (models/download-lock.ts) and a KV state's temporary
 * name (agent/kv/kv-temps.ts), whose holder or writer of another pid space is waited out (its
 * lease's row unchanged for a TTL, its lock's silence, its temp's age), never taken at once
 * (docs/agent.md, "Two cores on one data folder").
 */
let space: string | undefined;

export function pidSpace(): string {
  space ??= createHash("sha256")
    .update(
      [
        hostname(),
        read(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()),
        read(() => readlinkSync("/proc/self/ns/pid")),
      ].join("\0"),
    )
    .digest("hex")
    .slice(0, 12);
  return space;
}

/** Empty where the OS has no such file (not Linux) or refuses it. */
function read(get: () => string): string {
  try {
    return get();
  } catch {
    return "";
  }
}
