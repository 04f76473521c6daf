import { expect, test } from "bun:test";
import {
  bootStartedAt,
  cachedSpace,
  eitherPartOf,
  legacySpace,
  legacySpaceOf,
  partOf,
  pidSpace,
  spaceOf,
  spaceRelation,
  writtenRelation,
} from "../../src/platform/pid-space.ts";

// A passing failure to read the boot id or the pid namespace (too many open files at that
// moment) was kept for the core's life: its pid space wrong until it restarted, its own space's
// lease holders judged foreign, or another space's as its own (docs/agent.md, "Two cores on one
// data folder").

const fail = (code: string) => Object.assign(new Error(code), { code });

test("a passing read failure is not kept: the space is read again next time", () => {
  let reads = 0;
  let failing = true;
  const space = cachedSpace(
    [
      () => "boot",
      () => {
        reads++;
        if (failing) throw fail("EMFILE");
        return "pid:[4026531836]";
      },
    ],
    () => "host",
  );
  const partial = space();
  failing = false;
  const whole = space();
  expect(whole).not.toBe(partial);
  expect([space(), reads]).toEqual([whole, 2]);
});

test("a file the OS does not have is read once, its part empty for good", () => {
  let reads = 0;
  const space = cachedSpace(
    [
      () => {
        reads++;
        throw fail("ENOENT");
      },
      () => "pid:[4026531836]",
    ],
    () => "host",
  );
  expect([space(), space(), reads]).toEqual([space(), space(), 1]);
  expect(pidSpace()).toMatch(/^[0-9a-f]{18}$/);
});

// After a crash or power cut and a reboot, this host's previous core read as another pid space
// (its boot id changed): its session lease waited out 31 s before the app's crash recovery could
// resume that very session, its llama-server records kept for good, its download lock waited 60 s,
// its KV temps 10 min. A previous boot's processes are all gone.
test("this host's previous boot reads as one; another host, container or unknown boot does not", () => {
  const ours = spaceOf("box", "boot-2", "pid:[4026531836]");
  expect(spaceRelation(ours, ours)).toBe("own");
  // A container's namespace number differs after a reboot too: the boot alone tells.
  for (const ns of ["pid:[4026531836]", "pid:[4026532999]"])
    expect(spaceRelation(spaceOf("box", "boot-1", ns), ours)).toBe("previous_boot");
  // Another machine; a restarted container (same boot, another namespace); a core before
  // 2026-12-07 (one hash of all); a host with no boot ids (macOS, Windows) on either side.
  expect(spaceRelation(spaceOf("other", "boot-1", "pid:[4026531836]"), ours)).toBe("other");
  expect(spaceRelation(spaceOf("box", "boot-2", "pid:[4026532999]"), ours)).toBe("other");
  expect(spaceRelation("0123456789ab", ours)).toBe("other");
  expect(spaceRelation(spaceOf("box", "", "pid:[4026531836]"), ours)).toBe("other");
  expect(spaceRelation(ours, spaceOf("box", "", ""))).toBe("other");
});

// A core updated and restarted without a reboot: its predecessor (a core of 2026-12-07 before
// the space was three hashes) wrote one hash of all, 12 hex digits, which this core could never
// match: that core's own space's lease was waited out 31 s, its records kept for good.
test("this core's own space as the first cores wrote it (one hash of all) reads as its own", () => {
  expect(spaceRelation(legacySpace(), pidSpace())).toBe("own");
  expect(legacySpaceOf("box", "boot", "pid:[1]")).toMatch(/^[0-9a-f]{12}$/);
  expect(spaceRelation(legacySpaceOf("box", "boot", "pid:[1]"), pidSpace())).toBe("other");
});

// A host's name does not tell a reboot from another machine of that name: a thing written since
// this boot began is another space's (waited out), never a previous boot's (taken at once).
test("writtenRelation: a previous boot's only if written before this boot began", () => {
  const ns = "pid:[4026531836]";
  const ours = spaceOf("box", "boot-2", ns);
  const before = spaceOf("box", "boot-1", ns);
  expect(writtenRelation(before, ours, 999, 1_000)).toBe("previous_boot");
  expect(writtenRelation(before, ours, 1_000, 1_000)).toBe("other");
  // No uptime read, no time read: never a previous boot.
  expect(writtenRelation(before, ours, 999, Number.NaN)).toBe("other");
  expect(writtenRelation(before, ours, Number.NaN, 1_000)).toBe("other");
  expect(writtenRelation(ours, ours, 5_000, 1_000)).toBe("own");
  expect(writtenRelation(spaceOf("elsewhere", "boot-1", ns), ours, 0, 1_000)).toBe("other");
  expect(bootStartedAt()).toBeLessThanOrEqual(Date.now());
});

// runtime/pid-file.ts acts on a record of a space read in part only once its process is shown to
// be the very one: what counts as read in part is pinned here (a part missing, every other equal).
test("a space read in part: the host's part equal, each other one equal or missing", () => {
  const ns = "pid:[4026531836]";
  const ours = spaceOf("box", "boot-1", ns);
  expect(partOf(spaceOf("box", "", ns), ours)).toBe(true);
  expect(partOf(spaceOf("box", "boot-1", ""), ours)).toBe(true);
  expect(partOf(spaceOf("box", "", ""), ours)).toBe(true);
  for (const theirs of [
    ours,
    spaceOf("far", "", ns),
    spaceOf("box", "boot-2", ns),
    spaceOf("box", "", "pid:[1]"),
  ])
    expect(partOf(theirs, ours)).toBe(false);
  expect(partOf(legacySpaceOf("box", "", ns), ours)).toBe(false);
  expect(partOf(ours, spaceOf("box", "", ns))).toBe(false);
  expect(eitherPartOf(ours, spaceOf("box", "", ns))).toBe(true);
});
