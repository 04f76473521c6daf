import { closeSync, constants, fstatSync, openSync, readSync, type Stats, statSync } from "node:fs";
import { CoreError } from "../protocol/errors.ts";

/** Largest config file read (1 MiB): a real one is a few KiB; this bounds what a mistake costs. */
export const CONFIG_MAX_BYTES = 1024 * 1024;

/**
 * The file's text, read only when it is a regular file of at most CONFIG_MAX_BYTES: a FIFO
 * would block the core for good and a device like /dev/zero never ends. stat() decides before
 * opening; the open does not block (O_NONBLOCK) and the read stops past the cap, in case the
 * path changed in between.
 */
export function readConfigFile(file: string): string {
  const invalid = (message: string) =>
    new CoreError("config_invalid", message, { file, line: null, key: null });
  const check = (stats: Stats) => {
    if (stats.isDirectory()) throw invalid(`${file} is a directory, not a config file`);
    if (!stats.isFile()) throw invalid(`${file} is not a regular file (${kindOf(stats)})`);
    if (stats.size > CONFIG_MAX_BYTES) throw invalid(tooLarge(file, stats.size));
  };
  let fd: number;
  try {
    check(statSync(file));
    fd = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    if (err instanceof CoreError) throw err;
    throw invalid(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    check(fstatSync(fd));
    const buffer = Buffer.alloc(CONFIG_MAX_BYTES + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < buffer.length; length += n) {
      n = readSync(fd, buffer, length, buffer.length - length, null);
    }
    if (length > CONFIG_MAX_BYTES) throw invalid(tooLarge(file, length));
    return buffer.toString("utf8", 0, length);
  } catch (err) {
    if (err instanceof CoreError) throw err;
    throw invalid(`cannot read ${file}: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

function tooLarge(file: string, bytes: number): string {
  return `${file} is ${bytes} bytes, over the limit of ${CONFIG_MAX_BYTES} bytes for a config file`;
}

function kindOf(stats: Stats): string {
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  if (stats.isSocket()) return "a socket";
  return "not a file";
}
