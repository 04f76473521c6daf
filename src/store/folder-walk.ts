import type { Stats } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { extname, join, relative, resolve, sep } from "node:path";
import { decodeText } from "../documents/decode.ts";
import { type DriveAnswers, drives, whyLate } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { isWithin, pathKey } from "../util/path-key.ts";
import { outOfOpenFiles, readFileBytesAsync } from "../util/read-file.ts";
import { type Entry, entriesOf, onDisk, readable } from "./folder-names.ts";

/** A `memory.folders` walk (docs/agent.md, "Memory"): which files it indexes, which changes matter. */

/** Text files indexed from memory.folders; others are skipped. */
const TEXT_EXTENSIONS = new Set(".md .txt .markdown .rst .org .json .yaml .yml .csv".split(" "));
export const MAX_FILE_BYTES = 1024 * 1024;
export const MAX_FOLDER_FILES = 5000;

/** A text file the index does not take: over MAX_FILE_BYTES, or its size could not be read. */
export interface SkippedFile {
  path: string;
  reason: "too_large" | "unreadable";
}

export interface TextFile {
  /** Its path, the name below the folder as `folder-names.ts` keys it. */
  path: string;
  size: number;
  mtimeMs: number;
}

/**
 * The folder's text files (dot-files and non-regular files skipped: a FIFO is never read), at
 * most `maxFiles` (`full` when a file the index would take was left out: one it skips does not
 * fill it), the text files skipped (over MAX_FILE_BYTES, or no size to be had; at most
 * `maxFiles` named), and the directories read for them, the folder first (links are not followed). Paths are keys (`folder-names.ts`): a name that is not
 * UTF-8 is walked and indexed as any other. Each directory and file is asked of `drive` first:
 * one that does not answer fails the walk (`driveAnswered`).
 */
export async function listTextFiles(
  root: string,
  exclude: readonly string[],
  maxFiles = MAX_FOLDER_FILES,
  drive: DriveAnswers = drives,
): Promise<{ files: TextFile[]; dirs: string[]; full: boolean; skipped: SkippedFile[] }> {
  const out: TextFile[] = [];
  const skipped: SkippedFile[] = [];
  const skip = (path: string, reason: SkippedFile["reason"]) => {
    if (skipped.length < maxFiles) skipped.push({ path, reason });
  };
  const dirs: string[] = [];
  let full = false;
  // Before the realpaths below: on a share gone offline they held the walk (doctor's too) for good.
  await driveAnswered(drive, root, root);
  const excluded = await excludedBy(root, exclude, drive);
  const walk = async (dir: string): Promise<void> => {
    let entries: Entry[];
    await driveAnswered(drive, onDisk(root, dir), dir);
    try {
      entries = await entriesOf(root, dir);
    } catch (err) {
      // Out of open files, the walk would take the folder's files for removed and forget them:
      // it fails instead, and is tried again (folder-index.ts, RETRY_MS).
      if (outOfOpenFiles(err)) throw err;
      logger.warn(`memory folder ${readable(dir)} unreadable: ${(err as Error).message}`);
      return;
    }
    dirs.push(dir);
    for (const e of entries) {
      if (e.name.startsWith(".") || full) continue;
      const path = join(dir, e.name);
      if (excluded(path)) continue;
      if (e.isDirectory) await walk(path);
      else if (e.isFile && TEXT_EXTENSIONS.has(extname(e.name).toLowerCase())) {
        let st = await driveAnswered(drive, onDisk(root, path), path);
        // It failed: asked again for why (out of open files fails the walk, as a directory's does).
        if (!st)
          try {
            st = await stat(onDisk(root, path));
          } catch (err) {
            if (outOfOpenFiles(err)) throw err;
            skip(path, "unreadable"); // gone or unreadable: memory is best-effort
            continue;
          }
        if (!st.isFile()) continue;
        if (st.size > MAX_FILE_BYTES) skip(path, "too_large");
        else if (out.length >= maxFiles) full = true;
        else out.push({ path, size: st.size, mtimeMs: st.mtimeMs });
      }
    }
  };
  await walk(root);
  return { files: out, dirs, full, skipped };
}

/**
 * `path`'s stat (null: it failed) through the drive waits, or a throw naming `key` when its drive
 * does not answer: the walk fails, is logged and tried again (folder-index.ts). The folder's drive
 * is asked before its walk, but a share that died mid-walk hung the walk's next stat, directory
 * read or file read for good, every later walk queued behind it and a file thread held each.
 */
export async function driveAnswered(
  drive: DriveAnswers,
  path: string | Buffer,
  key: string,
): Promise<Stats | null> {
  const st = await drive.statOf(path);
  if (st === "late") throw new Error(`${readable(key)}: ${whyLate(drive, path)}`);
  return st;
}

/**
 * A listed file's text, at most `maxBytes`: the safe reader, a link not followed (the walk follows
 * none), so a file swapped for a link after the walk listed it is refused, not read from wherever
 * it points (outside the folder, into every user's memory). Decoded as a document's text is
 * (documents/decode.ts: UTF-16 by its mark, UTF-8, else Latin-1; binary data refused): read as
 * UTF-8 whatever it held, a UTF-16 note had a NUL between its letters and no word was found.
 */
export async function readFolderFile(path: string | Buffer, maxBytes: number): Promise<string> {
  const bytes = await readFileBytesAsync(path, maxBytes, { follow: false });
  // Its refusal names documents.add; here the file is only left out (folder-index.ts logs why).
  const decoded = await decodeText(bytes).catch(() => undefined);
  if (!decoded) throw new Error("its bytes are binary data, not text");
  return decoded.text;
}

/**
 * Whether a change the watch reports can matter to the index: not under a dot-name (a `.git`
 * folder churns) and not a file of another kind (a name with another extension; a folder's
 * name rarely has one, and a missed one is seen at a recall or the next start).
 */
export function worthAWalk(name: string | Buffer | null): boolean {
  if (name === null) return true;
  const parts = String(name).split(/[\\/]/);
  if (parts.some((p) => p.startsWith("."))) return false;
  const ext = extname(parts.at(-1) ?? "").toLowerCase();
  return ext === "" || TEXT_EXTENSIONS.has(ext);
}

/**
 * Whether a path the walk meets under `root` is, or is under, one of `exclude`. Compared as real
 * paths (the folder may be reached through a link, data_dir named another way), the walk's own
 * paths made real from the folder's (it follows no link below it); without case on the systems
 * whose file names usually have none.
 */
async function excludedBy(
  root: string,
  exclude: readonly string[],
  drive: DriveAnswers,
): Promise<(path: string) => boolean> {
  const rootReal = await real(root, drive);
  const out = (await Promise.all(exclude.map((p) => real(p, drive)))).map(pathKey);
  return (path) => {
    // A name that is not UTF-8 as it reads (U+FFFD for its bytes): under an excluded folder still.
    const p = pathKey(join(rootReal, readable(relative(root, path))));
    return out.some((x) => isWithin(p, x));
  };
}

/**
 * The other `folders` inside `root`, compared as real paths as `exclude` is: its walk leaves them
 * to their own walks, so a file is indexed once, under the folder nearest it. Walked by both, a
 * file had passages under each and one record (`memory_files` is keyed by path), the last
 * folder's: removed, its passages under the other folder stayed in the database for good.
 */
export async function foldersWithin(
  root: string,
  folders: readonly string[],
  drive: DriveAnswers = drives,
): Promise<string[]> {
  const rootReal = pathKey(await real(root, drive));
  const under = rootReal.endsWith(sep) ? rootReal : rootReal + sep;
  const reals = await Promise.all(folders.map((p) => real(p, drive)));
  return folders.filter((_, i) => pathKey(reals[i] as string).startsWith(under));
}

/**
 * `p`'s real path, or `p` resolved when it has none or its drive does not answer (asked first): a
 * realpath on a share gone offline never ends, and another memory folder's held this folder's walk
 * for good, every walk queued behind it. Compared as written, a folder inside it by a link is missed.
 */
const real = async (p: string, drive: DriveAnswers) =>
  (await drive.answers(p)) ? realpath(p).catch(() => resolve(p)) : resolve(p);

/** Consecutive runs of at most `maxFiles` files and `maxBytes` bytes (a bigger file alone). */
export function* batches(files: TextFile[], maxFiles: number, maxBytes: number): Generator<TextFile[]> {
  let current: TextFile[] = [];
  let bytes = 0;
  for (const f of files) {
    if (current.length > 0 && (current.length >= maxFiles || bytes + f.size > maxBytes)) {
      yield current;
      current = [];
      bytes = 0;
    }
    current.push(f);
    bytes += f.size;
  }
  if (current.length > 0) yield current;
}
