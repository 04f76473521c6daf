import { createHash } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname, uptime } from "node:os";

/**
 * Which processes a pid names, as a short id: two cores that share it see each other's pids,
 * two that do not (two containers, two machines on one network folder) cannot judge each other's
 * by `kill(pid, 0)`: "no such process" here says nothing of a holder there. Three short hashes,
 * each of one part (`spaceOf`): the host's name and, on Linux, its boot
 * (/proc/sys/kernel/random/boot_id: a pid namespace's number is reused after a reboot) and this
 * process's pid namespace (/proc/self/ns/pid), so that a previous boot of this host reads as one
 * (`spaceRelation`). Recorded with a session lease (store/session-lease.ts), a download lock
 * (models/download-lock.ts), a KV state's temporary name (agent/kv/kv-temps.ts) and a child's
 * record (runtime/pid-file.ts), whose holder or writer of another pid space is waited out (its
 * lease's row unchanged for a TTL, its lock's silence, its temp's age), never taken at once
 * (docs/agent.md, "Two cores on one data folder").
 */
export const pidSpace = cachedSpace(linuxParts());

/** This core's space as the first cores to record one wrote it (`legacySpaceOf`): read as ours. */
export const legacySpace = cachedSpace(linuxParts(), hostname, legacySpaceOf);

function linuxParts(): [() => string, () => string] {
  return [
    () => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
    () => readlinkSync("/proc/self/ns/pid"),
  ];
}

/** A file the OS does not have (not Linux, no /proc): its part is empty for good. */
const ABSENT = new Set(["ENOENT", "ENOTDIR"]);

/** Hex digits of each part's hash: the host, the boot, the pid namespace. */
const PART = 6;
const hashed = (part: string) => createHash("sha256").update(part).digest("hex").slice(0, PART);
/** The boot's part where the OS has no boot id (macOS, Windows): never judged a previous boot. */
const NO_BOOT = hashed("");

/** The pid space of a host, a boot and a pid namespace (`pidSpace`'s, tests). */
export function spaceOf(host: string, boot: string, ns: string): string {
  return hashed(host) + hashed(boot) + hashed(ns);
}

/** The pid space as cores of 2026-12-07 before `spaceOf` wrote it: one hash of all, 12 hex digits. */
export function legacySpaceOf(host: string, boot: string, ns: string): string {
  return createHash("sha256").update([host, boot, ns].join("\0")).digest("hex").slice(0, 12);
}

/**
 * How the pid space `theirs` (a holder's, a writer's) stands to ours: "own" (its pids are ours to
 * judge), "previous_boot" (this host's name, another boot: every process of it is gone) or
 * "other" (another machine or container; a space as cores of 2026-12-07 wrote it, one hash of
 * all, is judged as then: its own space's as ours, any other as another's). A host's name is not proof (two VMs both named
 * "ubuntu" on one network folder): such a machine's live holder judged a previous boot's loses
 * only what another space's waiting adds, as before pid spaces (docs/agent.md, "Two cores on one
 * data folder"). Both boots must be known: a host without boot ids never reads as rebooted.
 */
export function spaceRelation(theirs: string, ours: string): "own" | "previous_boot" | "other" {
  if (theirs === ours) return "own";
  // A core updated in place (no reboot): its predecessor's own space, written the old way.
  if (ours === pidSpace() && theirs === legacySpace()) return "own";
  const whole = /^[0-9a-f]{18}$/;
  if (!whole.test(theirs) || !whole.test(ours)) return "other";
  const boot = (s: string) => s.slice(PART, 2 * PART);
  const sameHost = theirs.slice(0, PART) === ours.slice(0, PART);
  const known = boot(theirs) !== NO_BOOT && boot(ours) !== NO_BOOT;
  return sameHost && known && boot(theirs) !== boot(ours) ? "previous_boot" : "other";
}

/**
 * Whether `theirs` is `ours` as read in part (`cachedSpace`: a passing EMFILE gives a call its
 * space without that part, the hash of nothing): the host's part equal, each other one equal or
 * missing. Not proof: another Linux machine of this host's name in its first pid namespace (the
 * same number on every host) reads so too, so a thing of such a space is acted on only once shown
 * to be this space's (runtime/pid-file.ts: the very process, by its start time and program).
 */
export function partOf(theirs: string, ours: string): boolean {
  const whole = /^[0-9a-f]{18}$/;
  if (theirs === ours || !whole.test(theirs) || !whole.test(ours)) return false;
  const part = (s: string, i: number) => s.slice(i * PART, (i + 1) * PART);
  if (part(theirs, 0) !== part(ours, 0)) return false;
  return [1, 2].every((i) => part(theirs, i) === part(ours, i) || part(theirs, i) === NO_BOOT);
}

/** `partOf` either way: the space read in part when written, or by the core reading it now. */
export const eitherPartOf = (a: string, b: string) => partOf(a, b) || partOf(b, a);

/**
 * `spaceRelation`, a previous boot's only where the thing (a lock, a temp, a note, a record) was
 * last written before this boot began (`writtenMs`: its file's or record's time, on its writer's
 * clock): a host's name alone does not tell a reboot from another machine of that name (two VMs
 * both `ubuntu` on one network folder), whose live lock beats every 5 s and whose temp is being
 * written now; those were taken at once, two writers on one partial, a half-written file removed.
 * One touched since is judged as another space's (waited out). A clock behind after the reboot
 * (no RTC) only waits a previous boot's out too.
 */
export function writtenRelation(
  theirs: string,
  ours: string,
  writtenMs: number,
  bootMs = bootStartedAt(),
): ReturnType<typeof spaceRelation> {
  const where = spaceRelation(theirs, ours);
  return where === "previous_boot" && !(writtenMs < bootMs) ? "other" : where;
}

/** When this boot began, on the wall clock (ms); NaN when the uptime cannot be read (never before it). */
export function bootStartedAt(): number {
  try {
    return Date.now() - uptime() * 1000;
  } catch {
    return Number.NaN;
  }
}

/**
 * The pid space of `parts` (the boot, the pid namespace: read on each try, throwing when they
 * cannot be), kept once each was read or is absent. A passing failure (EMFILE, ENFILE, EINTR,
 * EIO…) gives this call's answer without it but is asked again next time: kept, the space was
 * wrong for the core's life, its own pid space's cores judged foreign (their frozen leases waited
 * out, never taken at once) or, on one host, another space's judged as its own.
 */
export function cachedSpace(
  parts: [() => string, () => string],
  host: () => string = hostname,
  of: (host: string, boot: string, ns: string) => string = spaceOf,
): () => string {
  let space: string | undefined;
  return () => {
    if (space !== undefined) return space;
    let whole = true;
    const [boot, ns] = parts.map((get) => {
      try {
        return get();
      } catch (err) {
        if (!ABSENT.has((err as { code?: string }).code ?? "")) whole = false;
        return "";
      }
    }) as [string, string];
    const id = of(host(), boot, ns);
    if (whole) space = id;
    return id;
  };
}
