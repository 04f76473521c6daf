import { randomBytes } from "node:crypto";
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { copyFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";

/**
 * The cache's names for a downloaded blob, written so that a reader never sees a half-made
 * one: a snapshot entry is made beside its final name and renamed into place.
 */

export type MakeSymlink = (target: string, path: string) => void;

const defaultSymlink: MakeSymlink = (target, path) => symlinkSync(target, path);

/**
 * `snapshots/<commit>/<file>` → the blob, as a relative link (the cache folder can move). Where
 * links cannot be made (Windows without developer mode, some network drives) the blob is
 * copied instead, as huggingface_hub does: off the event loop, since a model is gigabytes and
 * the core must keep answering meanwhile. Returns how it was made.
 */
export async function linkSnapshot(
  blob: string,
  pointer: string,
  symlink: MakeSymlink = defaultSymlink,
): Promise<"link" | "copy"> {
  mkdirSync(dirname(pointer), { recursive: true });
  const temp = join(dirname(pointer), `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    symlink(relative(dirname(pointer), blob), temp);
    renameSync(temp, pointer);
    return "link";
  } catch (err) {
    rmSync(temp, { force: true });
    if (!linksUnsupported(err)) throw err;
  }
  try {
    await copyFile(blob, temp);
    renameSync(temp, pointer);
    return "copy";
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}

function linksUnsupported(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "EPERM" || code === "EOPNOTSUPP" || code === "ENOSYS" || code === "EINVAL";
}

/** `refs/<revision>` holds the commit the revision pointed to (no newline, as huggingface_hub writes it). */
export function writeRef(refFile: string, commit: string): void {
  mkdirSync(dirname(refFile), { recursive: true });
  const temp = join(dirname(refFile), `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    writeFileSync(temp, commit);
    renameSync(temp, refFile);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}
