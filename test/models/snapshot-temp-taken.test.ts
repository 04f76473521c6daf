import { expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { linkSnapshot } from "../../src/models/snapshot-link.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A blob of a cache in `root`, and where its snapshot entry goes. */
function blobIn(root: string): { blob: string; pointer: string } {
  mkdirSync(join(root, "blobs"));
  writeFileSync(join(root, "blobs", "abc"), "model");
  return { blob: join(root, "blobs", "abc"), pointer: join(root, "snapshots", "c1", "model.gguf") };
}

// The snapshot entry's temp name found taken (EEXIST: another core's temp of that name, a file
// someone put there): the link was never made, yet the clean-up removed by name the file that was
// there, not the core's. It is left, and the pull fails on the error as it did.
test("a link refused for a taken temp name leaves the file at that name", async () => {
  using dir = tmpdir();
  const { blob, pointer } = blobIn(dir.path);
  let taken = "";
  const symlink = (_target: string, path: string) => {
    taken = path;
    writeFileSync(path, "theirs");
    throw Object.assign(new Error(`EEXIST: file already exists, symlink '${path}'`), { code: "EEXIST" });
  };
  const err = await linkSnapshot(blob, pointer, { symlink }).catch((e) => e);
  expect((err as NodeJS.ErrnoException).code).toBe("EEXIST");
  expect(readFileSync(taken, "utf8")).toBe("theirs");
});

test("a copy whose temp name is found taken leaves the file at that name", async () => {
  using dir = tmpdir();
  const { blob, pointer } = blobIn(dir.path);
  let taken = "";
  const unsupported = () => {
    throw Object.assign(new Error("EPERM: operation not permitted, symlink"), { code: "EPERM" });
  };
  // Links refused (a FAT drive), and the name another's by the time the copy creates it.
  const hardlink = (_target: string, path: string) => {
    taken = path;
    unsupported();
  };
  const err = await linkSnapshot(blob, pointer, {
    symlink: unsupported,
    hardlink: (t, p) => {
      try {
        hardlink(t, p);
      } finally {
        writeFileSync(p, "theirs");
      }
    },
  }).catch((e) => e);
  expect((err as NodeJS.ErrnoException).code).toBe("EEXIST");
  expect(readFileSync(taken, "utf8")).toBe("theirs");
});
