import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { linkSnapshot, writeRef } from "../../src/models/snapshot-link.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A core killed mid snapshot-copy (a folder that takes no links: FAT, exFAT) left its hidden temp,
// the model's size, in the snapshot folder for good: nothing ever removed it.
describe("a snapshot copy's temp a dead pull left", () => {
  const HOUR = 3600 * 1000;
  /** A pid no process has: over Linux's largest pid_max (2^22) and macOS's. */
  const DEAD = 9_999_999;

  function folder() {
    const dir = tmpdir("local-ai-snaptemp-");
    const blob = join(dir.path, "blobs", "ab".repeat(32));
    const snap = join(dir.path, "snapshots", "c".repeat(40));
    mkdirSync(join(dir.path, "blobs"));
    mkdirSync(snap, { recursive: true });
    writeFileSync(blob, "model bytes");
    const temp = (name: string, ageMs: number) => {
      const path = join(snap, name);
      writeFileSync(path, "half a copy");
      const at = (Date.now() - ageMs) / 1000;
      utimesSync(path, at, at);
      return name;
    };
    return { dir, blob, snap, temp };
  }

  test("one whose maker is gone, untouched an hour, is removed by the next pull's link", async () => {
    const { dir, blob, snap, temp } = folder();
    using _ = dir;
    temp(`.${DEAD}-0123456789ab.tmp`, 2 * HOUR);
    // An earlier build's name (no pid in it), untouched a day: no pull is still making it.
    temp(".abcdef012345.tmp", 25 * HOUR);
    expect(await linkSnapshot(blob, join(snap, "m.gguf"))).toBe("link");
    expect(readdirSync(snap)).toEqual(["m.gguf"]);
  });

  test("one a live pull may still be making is kept: its maker alive, or written to lately", async () => {
    const { dir, blob, snap, temp } = folder();
    using _ = dir;
    // Another core's copy under way (its pid alive: this test's parent stands for it).
    const alive = temp(`.${process.ppid}-0123456789ab.tmp`, 2 * HOUR);
    // Its maker unknown here (another pid namespace, a container sharing the cache) but written
    // to minutes ago: a copy goes on writing, its flush takes minutes at most.
    const recent = temp(`.${DEAD}-abcdef012345.tmp`, 10 * 60 * 1000);
    const earlier = temp(".0123456789ab.tmp", 2 * HOUR);
    // Not a temp's name at all: a repo's file is never touched.
    const other = temp(".hidden.tmp", 48 * HOUR);
    await linkSnapshot(blob, join(snap, "m.gguf"));
    expect(readdirSync(snap).sort()).toEqual([alive, recent, earlier, other, "m.gguf"].sort());
  });

  // writeRef's temp beside refs/<revision>: a core killed between its write and its rename left
  // it for good, as the snapshot's was (no git ref name starts with '.', so none is a real ref).
  test("a ref's temp a dead pull left is removed by the next ref written there", async () => {
    const { dir } = folder();
    using _ = dir;
    const refs = join(dir.path, "refs");
    mkdirSync(refs);
    const old = (name: string, ageMs: number) => {
      writeFileSync(join(refs, name), "c".repeat(40));
      const at = (Date.now() - ageMs) / 1000;
      utimesSync(join(refs, name), at, at);
      return name;
    };
    old(`.${DEAD}-0123456789ab.tmp`, 2 * HOUR);
    old(".abcdef012345.tmp", 25 * HOUR);
    const alive = old(`.${process.ppid}-0123456789ab.tmp`, 2 * HOUR);
    writeRef(join(refs, "main"), "d".repeat(40));
    expect(readdirSync(refs).sort()).toEqual([alive, "main"].sort());
  });
});

// writeRef wrote its temp by name without O_EXCL: a name found taken (another core's temp, a link
// planted there) was written through, renamed as the ref and gone; now another name is taken.
test("a ref's temp name found taken is left as it is, another one used", () => {
  using dir = tmpdir();
  const refs = join(dir.path, "refs");
  mkdirSync(refs);
  const theirs = join(refs, `.${process.ppid}-0123456789ab.tmp`);
  writeFileSync(theirs, "another core's temp");
  const names = [theirs, join(refs, `.${process.pid}-ba9876543210.tmp`)];
  writeRef(join(refs, "main"), "d".repeat(40), () => names.shift() as string);
  expect([readFileSync(theirs, "utf8"), readFileSync(join(refs, "main"), "utf8")]).toEqual([
    "another core's temp",
    "d".repeat(40),
  ]);
});
