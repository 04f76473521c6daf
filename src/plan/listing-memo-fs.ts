import { readdir, readFile, realpath, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { bootStartedAt } from "../platform/pid-space.ts";
import { allowedEnv } from "../util/child-allowlist.ts";
import { drives, statLate } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateTreeAsync, replacePrivateFileAsync } from "../util/private-fs.ts";
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
    // Its drive asked first (util/drive-answers.ts): a data_dir on a share gone dead is not
    // written, and no thread of the runtime's pool is given to a write that never answers.
    const late = await statLate(drives, dataDir);
    if (late !== null) throw new Error(`${dataDir}: ${late}`);
    if (!going()) return;
    // As runtime/pid-file.ts writes its records, not store/atomic.ts writeFileAtomic: its two
    // fsyncs would sit on a first cold chat's way to its spawn, for a file whose loss (or a torn
    // one, read as corrupt) costs one listing. Each folder under data_dir made owner-only, none
    // followed if it is a link; all of it off the loop, a turn between steps, `going` asked at each.
    const dir = await ensurePrivateTreeAsync(dataDir, [MEMO_FOLDER], going);
    if (dir === null) return;
    // One name for every core: one killed mid-write leaves at most this one file, the next write
    // reuses it. Two cores writing at once may tear it: read as corrupt, a listing asked again.
    const dest = join(dir, MEMO_NAME);
    if (!(await replacePrivateFileAsync(join(dir, `${MEMO_NAME}.tmp`), dest, text, going))) return;
    // A listing that wanted it gone while it was renamed in (listing-memo.ts learned): taken back.
    if (!going()) await rm(dest, { force: true });
  },
  // Asked of its drive first too: a listing removes it even after its read came late (listing-memo.ts
  // `wrote`), and an rm on a dead share held a thread of the pool for good, one more each listing.
  remove: async (path) => {
    const late = await statLate(drives, dirname(path));
    if (late !== null) throw new Error(`${dirname(path)}: ${late}`);
    await rm(path, { force: true });
  },
  setTimer: (fn, ms) => {
    setTimeout(fn, ms).unref?.();
  },
  info: (message) => logger.info(message),
};
