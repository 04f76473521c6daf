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
export const pidSpace = cachedSpace([
  () => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
  () => readlinkSync("/proc/self/ns/pid"),
]);

/** A file the OS does not have (not Linux, no /proc): its part is empty for good. */
const ABSENT = new Set(["ENOENT", "ENOTDIR"]);

/**
 * The pid space of `parts` (read on each try, throwing when they cannot be), kept once each was
 * read or is absent. A passing failure (EMFILE, ENFILE, EINTR, EIO…) gives this call's answer
 * without it but is asked again next time: kept, the space was wrong for the core's life, its
 * own pid space's cores judged foreign (their frozen leases waited out, never taken at once) or,
 * on one host, another space's judged as its own.
 */
export function cachedSpace(parts: (() => string)[], host: () => string = hostname): () => string {
  let space: string | undefined;
  return () => {
    if (space !== undefined) return space;
    let whole = true;
    const read = parts.map((get) => {
      try {
        return get();
      } catch (err) {
        if (!ABSENT.has((err as { code?: string }).code ?? "")) whole = false;
        return "";
      }
    });
    const id = createHash("sha256")
      .update([host(), ...read].join("\0"))
      .digest("hex")
      .slice(0, 12);
    if (whole) space = id;
    return id;
  };
}
