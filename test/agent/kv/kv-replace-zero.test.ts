import { describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { entryOf } from "../../../src/agent/kv/kv-entry.ts";
import { emptyRecord } from "../../../src/agent/kv/prompt-record.ts";
import { holdOpen } from "../../fixtures/held-file.ts";
import { swappingAfterOpen } from "../../fixtures/swap-after-open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A session's next save is renamed onto its state file's name: the rename frees the old file's
// blocks as an unlink does, so unzeroed they keep the earlier turns' tokens after the session is
// erased (docs/agent.md, "Files of erased words are zeroed before they go"). A descriptor the test
// holds (fixtures/held-file.ts) reads what the disk kept.
const FP = "f".repeat(32);

async function save(disk: KvDisk, tokens: string, source: string): Promise<void> {
  const name = disk.nameOf("u", "s");
  const temp = disk.tempName(name);
  fs.writeFileSync(join(disk.dir, temp), tokens);
  const n = Buffer.byteLength(tokens);
  const entry = entryOf(
    { userId: "u", sessionId: "s" },
    FP,
    { n_saved: 10, n_written: n },
    emptyRecord(),
    [source],
    1,
  );
  expect(await disk.commit(temp, entry)).toBe(true);
}

/** A folder whose session u/s has one save, and the paths of its state file and sidecar. */
async function savedOnce(dir: string) {
  const disk = new KvDisk(dir, 10_000_000);
  await save(disk, "my old secret turn\n".repeat(100), "document:old-secret");
  const name = disk.nameOf("u", "s");
  return { disk, bin: join(dir, `${name}.bin`), sidecar: join(dir, `${name}.json`) };
}

describe("a state file replaced by the session's next save", () => {
  test("the old state file and sidecar are zeroed once renamed over", async () => {
    using dir = tmpdir();
    const { disk, bin, sidecar } = await savedOnce(dir.path);
    using oldBin = holdOpen(bin);
    using oldSidecar = holdOpen(sidecar);
    await save(disk, "the new turn\n".repeat(50), "document:new");
    await disk.zeroes.done();
    expect(oldBin.zeroed().allZero).toBe(true);
    expect(oldSidecar.zeroed().allZero).toBe(true);
    expect(fs.readFileSync(bin, "utf8")).toBe("the new turn\n".repeat(50));
  });

  test("touch's rewrite of the sidecar zeroes the one it replaces", async () => {
    using dir = tmpdir();
    const { disk, sidecar } = await savedOnce(dir.path);
    using oldSidecar = holdOpen(sidecar);
    const entry = disk.entry("u", "s");
    if (!entry) throw new Error("no entry");
    disk.touch(entry);
    await disk.zeroes.done();
    expect(oldSidecar.zeroed().allZero).toBe(true);
    expect(disk.entry("u", "s")?.note_sources).toEqual(["document:old-secret"]);
  });
});

/**
 * A save of u/s committed with `wanted` answering `keep`, its sidecar at the name a folder when
 * `folderAtSidecar`: whether it was kept, and the staged sidecar as the disk holds it after.
 */
async function commitHoldingStaged(dir: string, keep: boolean, folderAtSidecar: boolean) {
  const disk = new KvDisk(dir, 10_000_000);
  const name = disk.nameOf("u", "s");
  if (folderAtSidecar) fs.mkdirSync(join(dir, `${name}.json`));
  const temp = disk.tempName(name);
  fs.writeFileSync(join(dir, temp), "tokens\n");
  const entry = entryOf(
    { userId: "u", sessionId: "s" },
    FP,
    { n_saved: 1, n_written: 7 },
    emptyRecord(),
    ["document:secret"],
    1,
  );
  let staged: ReturnType<typeof holdOpen> | undefined;
  const wanted = () => {
    const f = fs.readdirSync(dir).find((n) => n.endsWith(".json.tmp"));
    if (f) staged = holdOpen(join(dir, f));
    return keep;
  };
  const kept = await disk.commit(temp, entry, wanted);
  await disk.zeroes.done();
  if (!staged) throw new Error("no staged sidecar was seen");
  const held = staged;
  return { kept, held, temps: fs.readdirSync(dir).filter((n) => n.endsWith(".tmp")) };
}

// A save whose session is erased while its sidecar is staged (`wanted` false): the staged
// sidecar, the prompt record's notes, was removed unzeroed.
test("a staged sidecar of a save not kept is zeroed as it goes", async () => {
  using dir = tmpdir();
  const { kept, held } = await commitHoldingStaged(dir.path, false, false);
  using _ = held;
  expect(kept).toBe(false);
  expect(held.zeroed().allZero).toBe(true);
});

// A sidecar whose rename fails (here a folder at its name; a full or read-only disk does the
// same): the staged sidecar was removed by stageFileAtomic's own cleanup, unzeroed, its notes
// quoting the session's passages left in the disk's blocks.
test("a staged sidecar whose rename fails is zeroed as it goes", async () => {
  using dir = tmpdir();
  const { kept, held, temps } = await commitHoldingStaged(dir.path, true, true);
  using _ = held;
  expect(kept).toBe(false);
  expect(held.zeroed()).toEqual({ size: expect.any(Number), allZero: true });
  expect(held.read().length).toBeGreaterThan(0);
  expect(temps).toEqual([]);
});

// Another core's save renamed onto the sidecar's name after each of replaceZeroed's opens (made
// right after each open's own check, as drop-file-swapped.test.ts does): the rewrite is refused,
// and its staged sidecar was neither committed nor discarded, left on disk with its descriptor
// open until a next start's sweep.
test("a sidecar rewrite refused for a name swapped under each open leaves no staged file", async () => {
  using dir = tmpdir();
  const { disk, sidecar } = await savedOnce(dir.path);
  const entry = disk.entry("u", "s");
  if (!entry) throw new Error("no entry");
  let swaps = 0;
  swappingAfterOpen(
    sidecar,
    () => {
      swaps++;
      fs.writeFileSync(`${sidecar}.other`, fs.readFileSync(sidecar));
      fs.renameSync(`${sidecar}.other`, sidecar);
    },
    () => disk.touch(entry),
  );
  await disk.zeroes.done();
  expect(swaps).toBe(3);
  expect(fs.readdirSync(dir.path).filter((n) => n.endsWith(".tmp"))).toEqual([]);
});
