import { randomBytes } from "node:crypto";
import { closeSync, fstatSync, fsync, lstatSync, realpathSync, renameSync, statSync, write } from "node:fs";
import * as nodePath from "node:path";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { promisify } from "node:util";
import { CoreError, openFilesUsedUp } from "../protocol/errors.ts";
import type { PathRules } from "../util/full-path.ts";
import { syncFolderAsync } from "./atomic.ts";
import { fsProblemText } from "./data-dir-problem.ts";
import { noteExportTemp, rmQuietly } from "./export-temps.ts";
import { createPrivate, openFresh } from "./fresh-file.ts";
import { type FileIdentity, zeroFile, zeroOpen } from "./scrub-file.ts";

const writeAsync = promisify(write);
const fsyncAsync = promisify(fsync);

/**
 * The most `sessions.export` answers inline, counted as the JSON string it is written as: with
 * the envelope, well under the 32 MiB line the typed client reads. A bigger export is refused
 * (`data.reason: "export_too_large"`) for one written to a file the host names.
 */
export const EXPORT_INLINE_BYTES = 8 * 1024 * 1024;

/** An export's text gathered for the answer, refused as soon as it passes EXPORT_INLINE_BYTES. */
export async function exportInline(pieces: AsyncIterable<string>): Promise<string> {
  const parts: string[] = [];
  let bytes = 0;
  for await (const piece of pieces) {
    // As written inside the answer's line: quotes, backslashes, newlines and control characters escaped.
    bytes += Buffer.byteLength(JSON.stringify(piece)) - 2;
    if (bytes > EXPORT_INLINE_BYTES)
      throw new CoreError(
        "invalid_request",
        `params.path: the export is over ${EXPORT_INLINE_BYTES} bytes, more than one answer carries; name an absolute path to write it to`,
        { field: "path", reason: "export_too_large", limit_bytes: EXPORT_INLINE_BYTES },
      );
    parts.push(piece);
  }
  return parts.join("");
}

/**
 * An export written to `path` as the core writes its own files: owner-only (0600), never through
 * a link, into a fresh temp file beside it, synced and renamed over it, so `path` holds the old
 * file or the whole export, never a part. The pieces are written as they come, a slice of the
 * session at a time with the loop free between them. Its size in bytes. The temp file is noted
 * under `dataDir` while it exists, so one a killed core left is removed at the next start
 * (store/export-temps.ts), with `start`, this process's start as the OS tells it. `confirm` runs
 * right before the rename and may throw to leave no file.
 */
export async function exportToFile(
  path: string,
  pieces: AsyncIterable<string>,
  dataDir: string,
  confirm: () => unknown = () => {},
  start?: string | null,
): Promise<number> {
  let fd: number | undefined;
  let bytes = 0;
  let noted: (() => void) | undefined;
  let tmp: string | undefined;
  let written: FileIdentity | undefined;
  // Checked, written and renamed into the folder as the OS resolves it, the same folder each time.
  let folder = dirname(path);
  try {
    folder = exportFolder(path, dataDir);
    // Each name noted before its file exists; one found taken is another's, its note dropped
    // and that file left, never removed by the clean-up below (store/fresh-file.ts).
    const opened = openFresh(
      folder,
      () => tempName(basename(path)),
      (t) => {
        noted = noteExportTemp(dataDir, t, start);
        try {
          return createPrivate(t);
        } catch (err) {
          noted();
          noted = undefined;
          throw err;
        }
      },
    );
    tmp = opened.path;
    fd = opened.fd;
    written = fstatSync(fd);
    for await (const piece of pieces) {
      const buf = Buffer.from(piece);
      for (let at = 0; at < buf.length; ) at += (await writeAsync(fd, buf, at)).bytesWritten;
      bytes += buf.length;
    }
    await fsyncAsync(fd);
    // Nothing awaited from here to the rename: a delete of the session cannot come in between.
    // Closed after `confirm`: a session erased meanwhile has its temp zeroed through this.
    confirm();
    // Given up before the close: one that fails (EIO, EINTR) has released the number all the
    // same, the next open's (the store's thread shares the table), never to be dropped through.
    const held = fd;
    fd = undefined;
    closeSync(held);
    renameSync(tmp, join(folder, basename(path)));
    noted?.();
  } catch (err) {
    // The conversation's words it holds (a session erased meanwhile: `confirm`) zeroed on the
    // disk before it goes, only if it is still the file written (not another put at its name since);
    // its own failure (ENAMETOOLONG…) must not take the place of the export's.
    if (fd !== undefined && tmp !== undefined) await dropOpen(fd, tmp);
    else if (tmp !== undefined) {
      if (written) await zeroFile(tmp, written).catch(() => {});
      rmQuietly(tmp);
    }
    noted?.();
    if (err instanceof CoreError) throw err;
    const ours = openFilesUsedUp(err, `${path} cannot be written now`);
    if (ours) throw ours;
    const code = (err as { code?: string }).code;
    throw new CoreError("invalid_request", `params.path: ${path} cannot be written: ${fsProblemText(code)}`, {
      field: "path",
      reason: "path_unwritable",
      problem: code ?? "unknown",
    });
  }
  await syncFolderAsync(folder);
  return bytes;
}

/**
 * The temp through the descriptor it was written by (closed here): its name removed only while
 * it is still the temp's, then its bytes zeroed. By name, another file renamed onto it meanwhile
 * (rare, the name is fresh) was found instead, and the temp's freed blocks kept the words.
 */
async function dropOpen(fd: number, tmp: string): Promise<void> {
  let names = 0;
  try {
    const own = fstatSync(fd);
    const named = lstatSync(tmp, { throwIfNoEntry: false });
    if (named?.dev === own.dev && named.ino === own.ino) {
      rmQuietly(tmp);
      if (lstatSync(tmp, { throwIfNoEntry: false })) names = 1;
    }
  } catch {}
  await zeroOpen(fd, { names }).catch(() => {});
}

/** What a file name may take of a temp file's: 255 bytes (NAME_MAX) less `.` and `.<12 hex>.tmp`. */
const TEMP_NAME_BYTES = 255 - 18;

/**
 * `.<name>.<12 hex>.tmp`, the name cut at a whole character to fit: a name the file system takes
 * (up to 255 bytes) must not fail for its temp file's longer one.
 */
function tempName(name: string): string {
  let kept = "";
  let bytes = 0;
  for (const c of name) {
    bytes += Buffer.byteLength(c);
    if (bytes > TEMP_NAME_BYTES) break;
    kept += c;
  }
  return `.${kept}.${randomBytes(6).toString("hex")}.tmp`;
}

/**
 * The folder `path`'s file goes in, resolved (links, `..` after a link: the OS takes it from the
 * link's target, not from the text before it), refused inside the core's own folder before
 * anything is written: the rename would replace the live database (or its log) with the export,
 * and every user's conversations would be gone at the next read. A link to data_dir is caught too.
 */
function exportFolder(path: string, dataDir: string): string {
  if (namesFolder(path)) throw Object.assign(new Error("names a folder"), { code: "EISDIR" });
  const name = basename(path);
  const unfit = process.platform === "win32" ? windowsUnfitName(name) : undefined;
  if (unfit)
    throw new CoreError("invalid_request", `params.path: ${path} ends in ${unfit}; name another file`, {
      field: "path",
      reason: "path_unwritable",
      problem: "EINVAL",
    });
  // A folder that is missing fails here as the write would (ENOENT).
  const folder = realFolder(dirname(path));
  let data: string;
  try {
    data = realFolder(dataDir);
  } catch {
    // No data folder yet: nothing of the core's can be replaced.
    return folder;
  }
  if (!holds(data, folder) && !linkHolds(join(folder, name), data)) return folder;
  throw new CoreError(
    "invalid_request",
    `params.path: ${path} is inside app.data_dir (${dataDir}), the core's own files; name a path outside it`,
    { field: "path", reason: "path_unwritable", problem: "EPERM" },
  );
}

/**
 * Whether `path` names a folder by its spelling: the file is renamed in by its name, and such a
 * path (`dir/`, `dir/..`, a root) has none. A Windows share's root (`\\server\share`) is its own
 * dirname with the share as its basename: taken for a name, the export went to `share` inside
 * it. `p`: the OS's path rules (path.win32 in tests).
 */
export function namesFolder(path: string, p: PathRules = nodePath): boolean {
  const name = p.basename(path);
  if (name === "" || name === "." || name === "..") return true;
  return path.endsWith("/") || path.endsWith(p.sep) || p.dirname(path) === path;
}

const DEVICE = /^(CON|PRN|AUX|NUL|COM[1-9¹²³]|LPT[1-9¹²³]|CONIN\$|CONOUT\$)$/i;

/**
 * Why Windows programs could not open a file of this name, if they could not. Bun hands NTFS the
 * name as it is (an NT path), where Win32 calls (Explorer, a Node host, the user's editor) drop a
 * trailing dot or space and take CON, NUL, COM1… (with any extension) for devices: the export
 * was written, under a name nothing else opens or deletes. A `:` names a stream of another file,
 * which the rename cannot make: the export failed and left that file behind, empty.
 */
export function windowsUnfitName(name: string): string | undefined {
  if (name.includes(":")) return `${JSON.stringify(name)}, a name with ':' (an NTFS stream)`;
  if (/[. ]$/.test(name)) return `${JSON.stringify(name)}, a name ending in a dot or space`;
  const stem = (name.split(".")[0] as string).trimEnd();
  if (DEVICE.test(stem)) return `${JSON.stringify(name)}, a device's name on Windows (${stem.toUpperCase()})`;
  return undefined;
}

/**
 * Whether `folder` is `root` or inside it, both resolved: by their paths, or by the file system's
 * own identity of `folder` and each folder above it (device and inode), for one folder reached by
 * two paths that realpath leaves apart: a bind mount, a case-insensitive disk mounted on Linux
 * (WSL's `/mnt/c`, exFAT, ext4 casefold), a Windows drive compared as written (`realFolder`).
 */
function holds(root: string, folder: string): boolean {
  if (isWithin(root, folder)) return true;
  const id = identity(root);
  if (id === undefined) return false;
  for (let f = folder; ; f = dirname(f)) {
    const other = identity(f);
    if (other?.dev === id.dev && other.ino === id.ino) return true;
    if (dirname(f) === f) return false;
  }
}

/** Whether `folder` is `root` or inside it, both resolved, as paths. */
function isWithin(root: string, folder: string): boolean {
  const inside = relative(root, folder);
  return !(inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside));
}

/** A folder's device and inode; undefined where the file system gives none (an inode of 0). */
function identity(folder: string): { dev: bigint; ino: bigint } | undefined {
  try {
    const st = statSync(folder, { bigint: true });
    return st.ino === 0n ? undefined : { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

/**
 * Whether `target` is a link to data_dir or a folder above it: the rename replaces the link (it
 * is not followed), and a data_dir named through it is gone at the next start.
 */
function linkHolds(target: string, data: string): boolean {
  try {
    return lstatSync(target).isSymbolicLink() && holds(realFolder(target), data);
  } catch {
    // Missing, dangling, not a folder: replacing it takes nothing of the core's.
    return false;
  }
}

/**
 * A folder as the OS resolves it (links, junctions, its case on disk). Windows drives outside the
 * Mount Manager (ImDisk RAM disks, WinFsp mounts: rclone, sshfs-win) fail the native call with
 * EISDIR on every folder: a folder that is there is then compared as written, so an export to
 * such a drive is not refused and a data_dir on one still protected.
 */
function realFolder(folder: string): string {
  try {
    // Not resolve() first: it takes `link/..` away as text, where the OS goes to the target's parent.
    return realpathSync.native(folder);
  } catch (err) {
    // Missing, not a folder, not reachable: that error (ENOENT…), as the write would meet.
    if (!statSync(folder).isDirectory()) throw err;
    return resolve(folder);
  }
}
