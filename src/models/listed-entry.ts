import { win32 } from "node:path";
import { windowsDevicePath } from "../util/device-path.ts";

/**
 * What the hub's file listing may say of a file before the core builds a path from it. The
 * listing is the hub's word, not ours: a path becomes `snapshots/<commit>/<path>` and an oid
 * `blobs/<oid>`, so a `..` in either would put a link or a download outside the cache, or
 * take any local file for a blob already in place. huggingface_hub refuses a snapshot path
 * that leaves the snapshot folder (`_get_pointer_path`); here every listed file is checked
 * before anything is fetched or written. Pure: the pull's client and the remote fit check
 * share it.
 */

const SHA256 = /^[0-9a-f]{64}$/i;
const GIT_OID = /^[0-9a-f]{40}$/i;

/** Why a listed path cannot name a file inside a snapshot ("has a '..' segment"), or null. */
function unsafePathReason(path: string): string | null {
  if (path === "") return "is empty";
  if (/[\u0000-\u001f\u007f]/.test(path)) return "has a control character";
  if (path.includes("\\")) return "has a backslash";
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) return "is an absolute path";
  for (const segment of path.split("/")) {
    if (segment === "") return "has an empty segment";
    if (segment === "..") return "has a '..' segment";
    if (segment === ".") return "has a '.' segment";
  }
  return null;
}

/**
 * Why a path to be stored cannot be a file name on this system, or null: on Windows a reserved
 * character (`:` would write an NTFS stream), a device name, a trailing dot or space; anywhere a
 * segment longer than the file system holds (255 UTF-16 units on Windows, 255 bytes elsewhere).
 * Asked of the files a pull will store, before their download (the snapshot's link failed only
 * after it, gigabytes later).
 */
export function unstorableName(path: string, platform: NodeJS.Platform = process.platform): string | null {
  for (const segment of path.split("/")) {
    // NTFS counts UTF-16 units; ext4, APFS and the others bytes of UTF-8.
    if (platform === "win32" ? segment.length > 255 : Buffer.byteLength(segment) > 255)
      return "has a name longer than 255 characters";
    if (platform !== "win32") continue;
    if (/[<>:"|?*]/.test(segment)) return 'has a character Windows file names cannot hold (< > : " | ? *)';
    // As the core's own path checks know them: `nul .gguf`, `COM0`, `CONIN$` open a device too.
    if (windowsDevicePath(segment, win32)) return "is a Windows device name";
    if (/[. ]$/.test(segment)) return "ends with a dot or a space, which Windows drops";
  }
  return null;
}

/**
 * The longest path, in bytes, this system's calls take (PATH_MAX less its NUL): macOS 1024,
 * Linux and the BSDs 4096. Windows is left out: its long paths depend on the machine's settings.
 */
const PATH_BYTES: Partial<Record<NodeJS.Platform, number>> = { darwin: 1023, linux: 4095, freebsd: 1023 };

/**
 * Beside a snapshot entry its temp name is made first (snapshot-temps.ts): `/.` + its maker's pid
 * (at most 10 digits) + `-` + 12 hex + `.tmp`.
 */
const TEMP_NAME_BYTES = 29;

/**
 * Why the absolute path a file will be stored at (its snapshot entry) is longer than this system
 * takes, or null. Each name may fit (unstorableName) and all of them together not: the link
 * failed with ENAMETOOLONG only after the download, gigabytes later. `link`: the entry's relative
 * link to its blob, one `../` per folder it climbs, so deep folders of short names make it the
 * longer of the two (symlink() takes a target no longer than a path).
 */
export function unstorablePath(
  full: string,
  platform: NodeJS.Platform = process.platform,
  link = "",
): string | null {
  const max = PATH_BYTES[platform];
  if (max === undefined) return null;
  const folder = full.slice(0, full.lastIndexOf("/"));
  const longest = Math.max(Buffer.byteLength(full), Buffer.byteLength(folder) + TEMP_NAME_BYTES);
  if (longest > max) return `makes a path longer than this system's paths (${longest} bytes, at most ${max})`;
  const target = Buffer.byteLength(link);
  return target > max
    ? `is so deep that its link to the blob is longer than this system's paths (${target} bytes, at most ${max})`
    : null;
}

function isSha256(oid: string): boolean {
  return SHA256.test(oid);
}

function isGitOid(oid: string): boolean {
  return GIT_OID.test(oid);
}

/** A size in bytes as a listing must give it: a whole number, not negative. */
function isByteCount(size: unknown): size is number {
  return typeof size === "number" && Number.isSafeInteger(size) && size >= 0;
}

/** A file entry of the listing as the hub sent it (before anything is taken from it). */
export interface RawListedFile {
  path: string;
  size?: unknown;
  oid?: unknown;
  lfs?: unknown;
}

/**
 * Why the core refuses a file entry, as words that follow "the hub's file listing", or null.
 * `forDownload`: the entry will be fetched and stored, so it needs its size and, kept in git,
 * its git blob id (the blob's name); the remote fit check reads only the path and the sha256.
 */
export function refusedEntry(e: RawListedFile, forDownload: boolean): string | null {
  // Quoted only for a refusal: a listing of 10^5 good entries paid for as many JSON.stringify.
  const named = () => `names ${JSON.stringify(e.path)}`;
  const unsafe = unsafePathReason(e.path);
  if (unsafe) return `${named()}, which ${unsafe}: a listed path must stay inside the repo`;
  if (e.size === undefined ? forDownload : !isByteCount(e.size))
    return `${named()}, whose size ${JSON.stringify(e.size ?? null)} is not a byte count`;
  if (e.lfs !== undefined) {
    const lfs = (e.lfs ?? {}) as { oid?: unknown; size?: unknown };
    if (typeof lfs.oid !== "string" || !isSha256(lfs.oid))
      return `${named()} with lfs.oid ${JSON.stringify(lfs.oid ?? null)}, which is not a sha256 (64 hex characters)`;
    if (!isByteCount(lfs.size))
      return `${named()}, whose lfs.size ${JSON.stringify(lfs.size ?? null)} is not a byte count`;
    return null;
  }
  if (!forDownload) return null;
  if (e.oid === undefined) return `${named()}, which has no oid`;
  if (typeof e.oid !== "string" || !isGitOid(e.oid))
    return `${named()} with oid ${JSON.stringify(e.oid)}, which is not a git blob id (40 hex characters)`;
  return null;
}
