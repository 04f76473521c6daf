import { statSync } from "node:fs";

/** Which file, as it stood: the same inode, size and modification time is taken for the same bytes. */
export type FileStamp = { dev: number; ino: number; size: number; mtimeMs: number };

/** The file's stamp now; undefined when it cannot be read (removed meanwhile). */
export function fileStamp(path: string): FileStamp | undefined {
  try {
    const { dev, ino, size, mtimeMs } = statSync(path);
    return { dev, ino, size, mtimeMs };
  } catch {
    return undefined;
  }
}

export function sameStamp(a: FileStamp | undefined, b: FileStamp | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs
  );
}
