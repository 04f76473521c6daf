import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { copyFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";

/**
 * The cache's names for a downloaded blob, written so that a reader never sees a half-made
 * one: a snapshot entry is made beside its final name and renamed into place.
 */

export type MakeSymlink = (target: string, path: string) => void;

/** The two ways of naming the blob without copying it; tests replace them. */
export interface LinkMakers {
  symlink?: MakeSymlink | undefined;
  hardlink?: MakeSymlink | undefined;
}

const defaultSymlink: MakeSymlink = (target, path) => symlinkSync(target, path);
const defaultHardlink: MakeSymlink = (target, path) => linkSync(target, path);

/**
 * `snapshots/<commit>/<file>` → the blob, as a relative link (the cache folder can move). Where
 * symbolic links cannot be made (Windows without developer mode) a hard link names the same
 * bytes, which NTFS allows anyone: a copy would take the model's size twice, past what the
 * space check counted. Only where neither works (FAT, some network drives) is the blob copied,
 * as huggingface_hub does: off the event loop, since a model is gigabytes and the core must
 * keep answering meanwhile. Returns how it was made.
 */
export async function linkSnapshot(
  blob: string,
  pointer: string,
  links: LinkMakers = {},
): Promise<"link" | "hardlink" | "copy"> {
  mkdirSync(dirname(pointer), { recursive: true });
  const temp = join(dirname(pointer), `.${randomBytes(6).toString("hex")}.tmp`);
  const ways: ["link" | "hardlink", () => void][] = [
    ["link", () => (links.symlink ?? defaultSymlink)(relative(dirname(pointer), blob), temp)],
    ["hardlink", () => (links.hardlink ?? defaultHardlink)(blob, temp)],
  ];
  for (const [how, make] of ways) {
    try {
      make();
      renameSync(temp, pointer);
      // A hard link renamed onto a name of the same file (a pull again): POSIX rename() does
      // nothing and the temp stays, a hidden name keeping the model on disk once the blob goes.
      rmSync(temp, { force: true });
      return how;
    } catch (err) {
      rmSync(temp, { force: true });
      if (!linksUnsupported(err)) throw err;
    }
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
