import { closeSync, existsSync, lstatSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openToZero, zeroOpen, zeroOpenSync } from "../store/scrub-file.ts";
import { logger } from "../util/logger.ts";
import { writePrivateFile } from "../util/private-fs.ts";
import { FileTooLarge, readSmallFile } from "../util/read-file.ts";
import { LogRedactor, NOT_LOGGED } from "./log-redact.ts";

/**
 * Left in a logs folder once its files have been through the redactor. A new name when the
 * redactor learns what an older one kept: `.redacted`'s did not cut a quote split for length.
 */
export const REDACTED_MARK = ".redacted-2";
const EARLIER_MARKS = [".redacted"];
/** Far above a rotated file (llama.log_max_bytes); a larger one is removed, not read. */
const MAX_SCRUB_BYTES = 64 * 1024 * 1024;
const PART = ".redacting";

/**
 * A core from before the redactor (log-redact.ts) wrote llama-server's lines as they came, so
 * its files may quote a reply the user has since erased: put them through it once, in place
 * (a new file renamed over the old). A file that cannot be read or written keeps the folder
 * unmarked, and the next start tries again. The old file, and one too large to read, are zeroed
 * on the disk (docs/agent.md, The store: renamed over or unlinked alone, their blocks keep the
 * quoted replies); a file too large to read off the event loop: the promise is that zeroing.
 */
export function redactEarlierLogs(dir: string): Promise<void> {
  const mark = join(dir, REDACTED_MARK);
  if (existsSync(mark)) return Promise.resolve();
  const zeroing: Promise<void>[] = [];
  let done = true;
  for (const name of readdirSync(dir)) {
    if (!name.startsWith("llama-server")) continue;
    try {
      // One a crash left half written: its file is still there, whole.
      if (name.endsWith(PART)) {
        rmSync(join(dir, name));
        continue;
      }
      redactFile(join(dir, name), zeroing);
    } catch {
      done = false;
    }
  }
  const zeroed = Promise.all(zeroing).then(() => {});
  if (!done) return zeroed;
  writePrivateFile(mark, "");
  for (const earlier of EARLIER_MARKS) {
    try {
      rmSync(join(dir, earlier), { force: true });
    } catch {
      // Something else by that name: clutter, not a reason to say the logs were not redacted.
    }
  }
  return zeroed;
}

function redactFile(path: string, zeroing: Promise<void>[]): void {
  if (!lstatSync(path).isFile()) return;
  let text: string;
  try {
    text = readSmallFile(path, MAX_SCRUB_BYTES);
  } catch (err) {
    if (!(err instanceof FileTooLarge)) throw err;
    // Any size: its name goes now, its blocks are zeroed through the descriptor off the loop.
    const fd = openToZero(path);
    try {
      rmSync(path);
    } catch (e) {
      if (fd !== undefined) closeSync(fd);
      throw e;
    }
    if (fd !== undefined) zeroing.push(zeroOpen(fd).catch((e) => notZeroed(path, e)));
    return;
  }
  let redactor = new LogRedactor();
  const kept: string[] = [];
  for (const line of text.split("\n")) {
    // Each start's header (launcher.ts) begins a new launch's lines.
    if (line.startsWith("--- ")) redactor = new LogRedactor();
    // The file does not say which lines were parts of a longer one (log-sink.ts readLines), so
    // each is read as one: a `last read:` quote loses all after it, and the prefix-less lines
    // after it go. So does one an older redactor cut at a quote inside it, which kept the rest.
    const out = redactor.line(line.replace(`last read: ${NOT_LOGGED}`, "last read: '"), true);
    if (out !== null) kept.push(out);
  }
  const redacted = kept.join("\n");
  if (redacted === text) return;
  const next = `${path}${PART}`;
  // Opened before the rename: up to MAX_SCRUB_BYTES, zeroed here as it was read here.
  const old = openToZero(path);
  try {
    writePrivateFile(next, redacted);
    renameSync(next, path);
    if (old !== undefined) zeroOpenSync(old);
  } catch (err) {
    // A full disk: its part would hold the room the disk lacks until the next start.
    rmSync(next, { force: true });
    throw err;
  } finally {
    if (old !== undefined) closeSync(old);
  }
}

function notZeroed(path: string, err: unknown): void {
  logger.warn(`the earlier log ${path} was removed but could not be zeroed: ${(err as Error).message}`);
}
