import { readdir, readFile, realpath, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { bootStartedAt } from "../platform/pid-space.ts";
import { allowedEnv } from "../util/child-allowlist.ts";
import { drives, statLate } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateTree, replacePrivateFile } from "../util/private-fs.ts";
import { readSmallFileAsync } from "../util/read-file.ts";
import { MEMO_FOLDER, MEMO_NAME, type MemoEdges } from "./listing-memo.ts";

/** The listing memo's edges as the core runs them (plan/listing-memo.ts). */
export const realMemoEdges: MemoEdges = {
  platform: process.platform,
  arch: process.arch,
  realpath: (path) => realpath(path),
  stat: async (path) => {
    const s = await stat(path);
    return { size: s.size, mtimeMs: s.mtimeMs, ino: s.ino };
  },
  // One read, not an opendir's open, reads and close: each a turn of a cold start's busy loop. A
  // binary's folder is small; a PATH folder's few thousand names are read, then refused.
  names: async (dir, max) => {
    const names = await readdir(dir);
    return names.length > max ? null : names;
  },
  boot: async () => {
    if (process.platform === "linux") {
      const id = await readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => "");
      if (id.trim()) return id.trim();
    }
    // Elsewhere the boot's start, to the minute: a clock step reads as a reboot, a re-probe only.
    return String(Math.round(bootStartedAt() / 60_000));
  },
  env: () => allowedEnv(process.env),
  read: async (path, max) => {
    try {
      // Not through a link: a memo's name is the core's own (util/private-fs.ts).
      // And the core's user's only: another's planted there is no memo of this core's.
      return await readSmallFileAsync(path, max, { follow: false, owner: process.getuid?.() });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  },
  write: async (dataDir, text, going) => {
    // Its drive asked off the loop first: the writes below are synchronous, and a data_dir on a
    // share gone dead held ping and cancel in them (util/drive-answers.ts).
    const late = await statLate(drives, dataDir);
    if (late !== null) throw new Error(`${dataDir}: ${late}`);
    if (!going()) return;
    // As runtime/pid-file.ts writes its records, not store/atomic.ts writeFileAtomic: its two
    // fsyncs would sit on a first cold chat's way to its spawn, for a file whose loss (or a torn
    // one, read as corrupt) costs one listing. Each folder under data_dir made owner-only, none
    // followed if it is a link.
    const dir = ensurePrivateTree(dataDir, MEMO_FOLDER);
    // One name for every core: one killed mid-write leaves at most this one file, the next write
    // reuses it. Two cores writing at once may tear it: read as corrupt, a listing asked again.
    replacePrivateFile(join(dir, `${MEMO_NAME}.tmp`), join(dir, MEMO_NAME), text);
  },
  remove: (path) => rm(path, { force: true }),
  setTimer: (fn, ms) => {
    setTimeout(fn, ms).unref?.();
  },
  info: (message) => logger.info(message),
};
