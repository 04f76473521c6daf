import { existsSync, lstatSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
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
 * unmarked, and the next start tries again.
 */
export function redactEarlierLogs(dir: string): void {
  const mark = join(dir, REDACTED_MARK);
  if (existsSync(mark)) return;
  let done = true;
  for (const name of readdirSync(dir)) {
    if (!name.startsWith("llama-server")) continue;
    try {
      // One a crash left half written: its file is still there, whole.
      if (name.endsWith(PART)) {
        rmSync(join(dir, name));
        continue;
      }
      redactFile(join(dir, name));
    } catch {
      done = false;
    }
  }
  if (!done) return;
  writePrivateFile(mark, "");
  for (const earlier of EARLIER_MARKS) {
    try {
      rmSync(join(dir, earlier), { force: true });
    } catch {
      // Something else by that name: clutter, not a reason to say the logs were not redacted.
    }
  }
}

function redactFile(path: string): void {
  if (!lstatSync(path).isFile()) return;
  let text: string;
  try {
    text = readSmallFile(path, MAX_SCRUB_BYTES);
  } catch (err) {
    if (!(err instanceof FileTooLarge)) throw err;
    rmSync(path);
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
  try {
    writePrivateFile(next, redacted);
    renameSync(next, path);
  } catch (err) {
    // A full disk: its part would hold the room the disk lacks until the next start.
    rmSync(next, { force: true });
    throw err;
  }
}
