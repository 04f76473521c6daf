import { lstatSync, type Stats, statSync } from "node:fs";

/** A file as the file system knows it: a file replaced in place (a new inode, size or time) is another. */
export interface FileIdentity {
  path: string;
  size: number;
  mtimeMs: number;
  ino: number;
}

/** The file at `path` as it is now; undefined when it cannot be read. */
export function fileIdentity(path: string): FileIdentity | undefined {
  try {
    return identityOf(path, statSync(path));
  } catch {
    return undefined;
  }
}

/** The identity of `path` from its stat, asked elsewhere (off the loop: util/drive-answers.ts). */
export function identityOf(path: string, st: Pick<Stats, "size" | "mtimeMs" | "ino">): FileIdentity {
  return { path, size: st.size, mtimeMs: Math.floor(st.mtimeMs), ino: st.ino };
}

/** Whether `now` is still the file `then` was. */
export function sameFile(then: FileIdentity, now: FileIdentity | undefined): boolean {
  return (
    now !== undefined &&
    now.path === then.path &&
    now.size === then.size &&
    now.mtimeMs === then.mtimeMs &&
    now.ino === then.ino
  );
}

/** The size of the regular file at `path`; 0 for none (gone, a directory, a link). */
export function fileBytes(path: string): number {
  try {
    const st = lstatSync(path);
    return st.isFile() ? st.size : 0;
  } catch {
    return 0;
  }
}
