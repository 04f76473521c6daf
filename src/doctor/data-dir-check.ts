import { randomBytes } from "node:crypto";
import {
  accessSync,
  closeSync,
  constants,
  lstatSync,
  openSync,
  rmSync,
  type Stats,
  statfsSync,
  statSync,
  writeSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Config } from "../config/schema.ts";
import { KV_DIR } from "../plan/decide/slot-save.ts";
import { formatBytes } from "../plan/render.ts";
import { fsProblemText } from "../store/data-dir-problem.ts";
import { shellWord } from "../util/shell-word.ts";
import type { Check } from "./checks.ts";

const LOW_DISK_BYTES = 1024 ** 3;
/** The folder is fine but its disk has no room: moving data_dir is not the first fix. */
const FULL = new Set(["ENOSPC", "EDQUOT"]);

/**
 * Can the core keep its files in app.data_dir? Diagnosing creates nothing: a missing folder is
 * judged by its nearest existing ancestor (a writable folder: the core will create the rest); an
 * existing one by writing a probe file there and removing it at once (access(2) alone misses
 * ACLs and some network file systems), and so each folder the core writes in there. `probe`:
 * that write (tests replace it: as root every folder is writable).
 */
export function dataDirCheck(config: Config, probe: (dir: string) => void = writeProbe): Check {
  const dir = config.app.data_dir;
  const found = usableBase(dir, probe);
  if ("problem" in found) {
    const what =
      found.problem === "ENOTDIR"
        ? `${found.at} is a file, not a folder`
        : `${found.at}: ${fsProblemText(found.problem)}`;
    return {
      id: "data_dir",
      status: "fail",
      message: `data directory ${dir} is not writable: ${what}`,
      fix: FULL.has(found.problem)
        ? `free some disk space where ${dir} is (or set app.data_dir to a folder on a disk with room)`
        : "set app.data_dir to a folder this user can write",
      data: { path: dir, at: found.at, problem: found.problem },
    };
  }
  const where =
    found.base === resolve(dir)
      ? `${dir} is writable`
      : `${dir} does not exist yet and will be created (${found.base} is writable)`;
  const inside = found.base === resolve(dir) ? coreFoldersCheck(dir, probe) : undefined;
  if (inside) return inside;
  const loose = found.base === resolve(dir) ? othersMayWrite(found.base) : undefined;
  if (loose !== undefined) {
    return {
      id: "data_dir",
      status: "warn",
      message: `${where}, but it is writable by other users (mode ${loose}): they could plant links or files where the core keeps its own`,
      fix: `chmod 700 ${shellWord(dir)} (the core makes it so when it creates the folder)`,
      data: { path: dir, mode: loose },
    };
  }
  const free = freeBytes(found.base);
  if (free === undefined) {
    return { id: "data_dir", status: "ok", message: `${where} (free space unknown)`, data: { path: dir } };
  }
  if (free < LOW_DISK_BYTES) {
    return {
      id: "data_dir",
      status: "warn",
      message: `${where}, but only ${formatBytes(free)} of disk is free`,
      fix: "free some disk space: sessions, the memory index and logs live there",
      data: { path: dir, free_bytes: free },
    };
  }
  return {
    id: "data_dir",
    status: "ok",
    message: `${where}, ${formatBytes(free)} free`,
    data: { path: dir, free_bytes: free },
  };
}

type Base = { base: string } | { at: string; problem: string };

/** The data directory, or its nearest existing ancestor, when the core could write there. */
function usableBase(dir: string, probe: (dir: string) => void): Base {
  let at = resolve(dir);
  let stat: Stats;
  for (;;) {
    try {
      stat = statSync(at);
      break;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "EIO";
      // Missing, or an ancestor is a file (ENOTDIR): look one level up.
      if (code !== "ENOENT" && code !== "ENOTDIR") return { at, problem: code };
      const up = dirname(at);
      if (up === at) return { at, problem: code };
      at = up;
    }
  }
  if (!stat.isDirectory()) return { at, problem: "ENOTDIR" };
  try {
    if (at === resolve(dir)) {
      probe(at);
    } else {
      accessSync(at, constants.W_OK | constants.X_OK);
    }
  } catch (err) {
    return { at, problem: (err as NodeJS.ErrnoException).code ?? "EIO" };
  }
  return { base: at };
}

/** A probe file written in `dir` and removed: throws why the core could not write there. */
function writeProbe(dir: string): void {
  // A name no one can guess, made new ("wx": O_EXCL, never through a link): in a folder
  // others may write, a link planted at a guessable name had "ok" written over its target.
  const probe = join(dir, `.doctor-${randomBytes(8).toString("hex")}`);
  const fd = openSync(probe, "wx", 0o600);
  try {
    writeSync(fd, "ok");
  } finally {
    closeSync(fd);
    // A full disk makes the file and then refuses its bytes: it must not stay behind.
    rmSync(probe, { force: true });
  }
}

/**
 * The folders the core writes in under data_dir (docs/architecture.md): llama-server's logs,
 * the pid records (MCP servers' in run/mcp) and export notes, the saved KV state. Parents
 * before their children.
 */
const CORE_FOLDERS = ["logs", "run", join("run", "mcp"), join("run", "exports"), KV_DIR];

/**
 * A fail for the first of CORE_FOLDERS that exists and that the core cannot write in, or
 * undefined: one left owned by root after a `sudo` run, or made read-only, passed data_dir's
 * check and failed later with a vaguer error (a start without its log, a pid record not kept).
 * A missing one is made by the core; a link or a file there it refuses (ELOOP, ENOTDIR).
 */
function coreFoldersCheck(dir: string, probe: (dir: string) => void): Check | undefined {
  for (const name of CORE_FOLDERS) {
    const at = join(dir, name);
    let problem: string;
    let stat: Stats;
    try {
      stat = lstatSync(at);
      if (stat.isSymbolicLink()) problem = "ELOOP";
      else if (!stat.isDirectory()) problem = "ENOTDIR";
      else {
        probe(at);
        continue;
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "EIO";
      if (code === "ENOENT") continue;
      problem = code;
    }
    return {
      id: "data_dir",
      status: "fail",
      message: `${dir} is writable, but ${at}, where the core keeps its own files, is not: ${problem === "ENOTDIR" ? "it is a file, not a folder" : problem === "ELOOP" ? "it is a symbolic link, which the core refuses to write through" : fsProblemText(problem)}`,
      fix: coreFolderFix(at, problem),
      data: { path: dir, at, problem },
    };
  }
  return undefined;
}

/**
 * How to make `at` the core's again: its owner back (a `sudo` run left it root's), or its mode.
 * Windows has neither chown nor chmod (a folder's ACL says who writes it), macOS no chattr.
 */
function coreFolderFix(at: string, problem: string, platform: string = process.platform): string {
  if (FULL.has(problem)) return `free some disk space where ${at} is`;
  if (platform === "win32")
    return problem === "ENOTDIR" || problem === "ELOOP"
      ? `move ${at} out of the way (the core makes the folder again)`
      : `give this user write access to ${at} (its Properties, Security), or move it out of the way (the core makes the folder again)`;
  if (problem === "ENOTDIR" || problem === "ELOOP")
    return `move ${shellWord(at)} out of the way (the core makes the folder again)`;
  const uid = process.getuid?.();
  let owner: number | undefined;
  try {
    owner = statSync(at).uid;
  } catch {
    owner = undefined;
  }
  if (problem === "EROFS") return "set app.data_dir to a folder on a file system mounted read-write";
  if (uid !== undefined && owner !== undefined && owner !== uid)
    return `sudo chown -R "$(id -un)" ${shellWord(at)} (another user owns it: a run of the core with sudo?), then chmod 700 ${shellWord(at)}`;
  if (problem === "EPERM")
    return platform === "darwin"
      ? `chflags nouchg ${shellWord(at)} (it is locked), then chmod 700 ${shellWord(at)}`
      : `chattr -i ${shellWord(at)} (it is immutable), then chmod 700 ${shellWord(at)}`;
  return `chmod 700 ${shellWord(at)}`;
}

/**
 * The folder's mode in octal when group or others may write it (POSIX): the core refuses links
 * it finds inside (docs/doctor.md), but a folder others write is theirs to fill.
 */
function othersMayWrite(dir: string): string | undefined {
  if (process.platform === "win32") return undefined;
  try {
    const mode = statSync(dir).mode & 0o777;
    return mode & 0o022 ? mode.toString(8) : undefined;
  } catch {
    return undefined;
  }
}

function freeBytes(dir: string): number | undefined {
  try {
    const fs = statfsSync(dir);
    return Number(fs.bavail) * Number(fs.bsize);
  } catch {
    return undefined;
  }
}
