import { closeSync, constants, lstatSync, rmSync, writeSync } from "node:fs";
import { logger } from "../util/logger.ts";
import { openPrivateFile, tookSome } from "../util/private-fs.ts";

/**
 * Room kept for erasing on a full disk (docs/agent.md, The store): a delete writes the pages it
 * changes (zeroed, `secure_delete`) to the write-ahead log before they land in the database, so
 * it needs free space even though it frees some. This file holds that space, written out (not
 * sparse) when the store opens; an erase that meets a full disk removes it, erases in small
 * steps, and puts it back once the log is emptied.
 */
export const RESERVE_BYTES = 4 * 2 ** 20;

export class DiskReserve {
  /** Erases going in steps now: the reserve is put back after the last (an add's discard may run beside an erase). */
  private stepping = 0;

  constructor(
    readonly path: string,
    private readonly bytes = RESERVE_BYTES,
  ) {}

  /**
   * Writes the reserve when it is missing or short; a disk without the room logs it and goes on.
   * Never through a link (one planted in a data_dir others may write had a file of the user's
   * overwritten with zeros): a link there is refused, logged and removed, the name being the core's.
   */
  ensure(): boolean {
    try {
      const found = lstatSync(this.path);
      if (found.isFile() && found.size >= this.bytes) return true;
    } catch {}
    let fd: number | undefined;
    try {
      fd = openPrivateFile(this.path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC);
      const zeros = Buffer.alloc(Math.min(this.bytes, 1 << 20));
      // By what each write took: a disk with room for part of a piece takes that part and only
      // the next write fails, so counting whole pieces called a short reserve whole.
      for (let at = 0; at < this.bytes; )
        at += tookSome(writeSync(fd, zeros, 0, Math.min(zeros.length, this.bytes - at), at));
      return true;
    } catch (err) {
      logger.warn(
        `no room for the ${this.bytes}-byte reserve ${this.path} (${(err as Error).message}): erasing on a full disk may fail until space is freed`,
      );
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
      this.release();
      return false;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  /**
   * Frees the reserve's space for an erase. A folder at its name is left as it is (it may hold
   * the user's files): rmSync threw on it, which failed the store's open for good.
   */
  release(): void {
    try {
      rmSync(this.path, { force: true });
    } catch (err) {
      logger.warn(`the reserve ${this.path} could not be removed: ${(err as Error).message}`);
    }
  }

  /**
   * An erase (`steps` false); on a full disk (SQLITE_FULL) the same again in small steps, with
   * the reserve's room freed, put back once it is over.
   */
  async orInSteps<T>(erase: (steps: boolean) => Promise<T>): Promise<T> {
    try {
      return await erase(false);
    } catch (err) {
      if (!String((err as { data?: { problem?: unknown } }).data?.problem ?? "").startsWith("SQLITE_FULL"))
        throw err;
      logger.warn(`the disk is full: erasing with the reserve ${this.path} freed, in small steps`);
      this.stepping++;
      this.release();
      try {
        return await erase(true);
      } finally {
        if (--this.stepping === 0) this.ensure();
      }
    }
  }
}
