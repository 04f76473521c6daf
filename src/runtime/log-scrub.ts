import { closeSync, existsSync, fstatSync, lstatSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { shownArgs } from "../plan/secret-args.ts";
import { openToZeroChecked, zeroOpen } from "../store/scrub-file.ts";
import { logger } from "../util/logger.ts";
import { writePrivateFile } from "../util/private-fs.ts";
import { FileTooLarge, readSmallFile } from "../util/read-file.ts";
import { llamaLogLine } from "./llama-log-text.ts";
import { LogRedactor, NOT_LOGGED, type SecretHider, secretHider } from "./log-redact.ts";

/**
 * Left in a logs folder once its files have been through the redactor. A new name when the
 * redactor learns what an older one kept: `.redacted`'s did not cut a quote split for length,
 * `.redacted-2`'s kept the raw controls a GGUF's metadata brought (llama-log-text.ts),
 * `.redacted-3`'s (and each before) the rest of a quoted reply after a line of it begun "--- ".
 */
export const REDACTED_MARK = ".redacted-4";
const EARLIER_MARKS = [".redacted", ".redacted-2", ".redacted-3"];
/**
 * A launch's start line as every core wrote it (launch-steps.ts): a quoted reply's own line
 * begun "--- " (a diff's `--- a/file`, Markdown) is none, and ended the quote, the rest kept.
 */
const START_LINE = /^(--- \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z start )(.*)( \(pid \d+\))$/;

/**
 * A start line as today's core writes it (launch-steps.ts): a core before 2026-12-05 wrote the
 * arguments as given, an HF token or an MCP server's header of llama.extra_args and the launch's
 * key among them. Their values masked (plan/secret-args.ts `shownArgs`), and a hider of them for
 * the launch's lines, which quote a flag llama-server refuses. The arguments were joined by
 * spaces: a masked value goes on to the next flag (`--mcp-servers-json {"s": …}`).
 */
function startLine(m: RegExpExecArray): { line: string; hide: SecretHider } {
  const words = (m[2] as string).split(" ");
  const masked = shownArgs(words);
  const args: string[] = [];
  let joining = false;
  for (const [i, word] of words.entries()) {
    if (joining && !word.startsWith("-")) args[args.length - 1] += ` ${word}`;
    else {
      args.push(word);
      joining = masked[i] !== word;
    }
  }
  return { line: `${m[1]}${shownArgs(args).join(" ")}${m[3]}`, hide: secretHider(args, "") };
}
/** Far above a rotated file (llama.log_max_bytes); a larger one is removed, not read. */
const MAX_SCRUB_BYTES = 64 * 1024 * 1024;
const PART = ".redacting";
/** A file too large to read while it is zeroed: no log's name (log-sink.ts, log-prune.ts), an earlier log's still. */
const ZEROING = ".zeroing";

/** A pass under way, per folder: a second start (another model's log) shares it. */
interface Pass {
  /** The files rewritten: a start spawns after (launcher.ts), its log's lines never raced. */
  redacted: Promise<void>;
  done: Promise<void>;
  /** Stops the zeroing of a file still at its name, and the files not yet read (shutdown). */
  stop: AbortController;
}
const passes = new Map<string, Pass>();
/** Lines redacted between two turns of the event loop (a 64 MiB file took 1.7 s in one). */
const LINES_A_TURN = 16_384;
const turn = () => new Promise<void>((go) => setImmediate(go));

/**
 * A core from before the redactor (log-redact.ts) wrote llama-server's lines as they came, so
 * its files may quote a reply the user has since erased: put them through it once, in place
 * (a new file renamed over the old), a file and a part of one at a time, the loop turning
 * between. A file that cannot be read or written keeps the folder unmarked, and the next start
 * tries again. The old file, and one too large to read, are zeroed on the disk (docs/agent.md,
 * The store: renamed over or unlinked alone, their blocks keep the quoted replies), off the event
 * loop; the promise is that zeroing, and the folder is marked only after it: marked before, a
 * core that exited at once left the blocks unzeroed for good.
 */
export function redactEarlierLogs(dir: string): Promise<void> {
  const running = passes.get(dir);
  if (running) return running.done;
  if (existsSync(join(dir, REDACTED_MARK))) return Promise.resolve();
  const names = readdirSync(dir).filter((n) => n.startsWith("llama-server"));
  // Nothing to read: marked now, as before a start's first line.
  if (names.length === 0) {
    markDone(dir);
    return Promise.resolve();
  }
  const stop = new AbortController();
  const zeroing: Promise<boolean>[] = [];
  const redacted = redactAll(dir, names, zeroing, stop.signal);
  const pass: Pass = {
    stop,
    redacted: redacted.then(() => {}),
    done: redacted.then(async (done) => {
      const all = await Promise.all(zeroing);
      if (done && all.every(Boolean)) markDone(dir);
      if (passes.get(dir) === pass) passes.delete(dir);
    }),
  };
  passes.set(dir, pass);
  return pass.done;
}

/** The pass under way in `dir` has rewritten its files (none under way: at once). */
export function earlierLogsRedacted(dir: string): Promise<void> {
  return passes.get(dir)?.redacted ?? Promise.resolve();
}

/** Whether every file went through. */
async function redactAll(
  dir: string,
  names: string[],
  zeroing: Promise<boolean>[],
  stop: AbortSignal,
): Promise<boolean> {
  let done = true;
  for (const name of names) {
    await turn();
    if (stop.aborted) return false;
    try {
      // One a crash left half written: its file is still there, whole.
      if (name.endsWith(PART)) rmSync(join(dir, name));
      else await redactFile(join(dir, name), zeroing, stop);
    } catch {
      done = false;
    }
  }
  return done;
}

/**
 * The passes under way, waited for (the stop path: services.ts). A file too large to read is
 * zeroed at its name and unlinked after: its zeroing stops here, the file left for the next
 * start, so a shutdown waits at most for the replaced files' (each under MAX_SCRUB_BYTES).
 */
export async function earlierLogsSettled(): Promise<void> {
  const running = [...passes.values()];
  for (const pass of running) pass.stop.abort();
  await Promise.all(running.map((p) => p.done));
}

function markDone(dir: string): void {
  try {
    writePrivateFile(join(dir, REDACTED_MARK), "");
  } catch (err) {
    logger.warn(`could not mark the earlier llama-server logs in ${dir} redacted: ${(err as Error).message}`);
    return;
  }
  for (const earlier of EARLIER_MARKS) {
    try {
      rmSync(join(dir, earlier), { force: true });
    } catch {
      // Something else by that name: clutter, not a reason to say the logs were not redacted.
    }
  }
}

async function redactFile(path: string, zeroing: Promise<boolean>[], stop: AbortSignal): Promise<void> {
  if (!lstatSync(path).isFile()) return;
  let text: string;
  try {
    text = readSmallFile(path, MAX_SCRUB_BYTES);
  } catch (err) {
    if (!(err instanceof FileTooLarge)) throw err;
    const aside = setAside(path);
    const fd = openable(aside);
    // One the core cannot write goes all the same (a kept name keeps the words readable); one
    // that cannot go either throws here, the folder left unmarked, never into a promise no one awaits.
    if (fd === undefined) {
      rmSync(aside, { force: true });
      notZeroed(path, new Error("it could not be opened for writing; removed all the same"));
    } else zeroing.push(zeroThenRemove(aside, fd, stop));
    return;
  }
  let redactor = new LogRedactor();
  let hide: (text: string) => string = (text) => text;
  const kept: string[] = [];
  let read = 0;
  for (let line of text.split("\n")) {
    if (++read % LINES_A_TURN === 0) await turn();
    // Each start's header (launcher.ts) begins a new launch's lines.
    const start = START_LINE.exec(line);
    if (start) {
      redactor = new LogRedactor();
      ({ line, hide } = startLine(start));
    }
    // The file does not say which lines were parts of a longer one (log-sink.ts readLines), so
    // each is read as one: a `last read:` quote loses all after it, and the prefix-less lines
    // after it go. So does one an older redactor cut at a quote inside it, which kept the rest.
    const out = redactor.line(line.replace(`last read: ${NOT_LOGGED}`, "last read: '"), true);
    // Its controls escaped as a line is written now (an older core's kept them raw).
    if (out !== null) kept.push(llamaLogLine(hide(out)));
  }
  const redacted = kept.join("\n");
  // Stopped while read (a shutdown): the next start reads it again.
  stop.throwIfAborted();
  if (redacted === text) return;
  const next = `${path}${PART}`;
  // Opened before the rename, zeroed through after it, off the loop (up to MAX_SCRUB_BYTES).
  const old = openable(path);
  try {
    writePrivateFile(next, redacted);
    renameSync(next, path);
  } catch (err) {
    if (old !== undefined) closeSync(old);
    // A full disk: its part would hold the room the disk lacks until the next start.
    rmSync(next, { force: true });
    throw err;
  }
  // Its name is gone: a shutdown waits for this zeroing (earlierLogsSettled), as a next start cannot find it.
  if (old !== undefined) zeroing.push(zeroOpen(old).then(yes, (e) => notZeroed(path, e)));
  else notZeroed(path, new Error("it could not be opened for writing; replaced all the same"));
}

/**
 * `path` opened to be zeroed; none when it cannot be opened for writing. Another file at the name
 * after each open (another core's rotation renaming onto it) throws: renamed over or removed
 * unchecked, the file there last went unzeroed. It is left, the folder unmarked for the next start.
 */
function openable(path: string): number | undefined {
  const fd = openToZeroChecked(path);
  if (fd !== "changed") return fd;
  logger.warn(
    `the earlier log ${path} was replaced by another file each time it was opened: left for the next start`,
  );
  throw new Error(`${path} kept being replaced`);
}

/** Names tried for one file set aside: a stopped pass's file may hold the first (next one's). */
const ASIDE_TRIES = 8;

/**
 * A file too large to read, renamed out of the log's way before its zeroing (which a start does
 * not wait for): at the live log's name (llama.log_max_bytes over 64 MiB), the start appended its
 * first lines to it and they went with its unlink. A name taken (a stopped pass's file, left for
 * this pass: the run's own live log read again beside it) is never renamed over, its blocks
 * kept: the next is tried. Its name kept where it cannot be moved, or is one of these already.
 */
function setAside(path: string): string {
  if (path.endsWith(ZEROING)) return path;
  for (let n = 0; n < ASIDE_TRIES; n++) {
    const aside = n === 0 ? `${path}${ZEROING}` : `${path}.${n}${ZEROING}`;
    if (existsSync(aside)) continue;
    try {
      renameSync(path, aside);
      return aside;
    } catch {
      return path;
    }
  }
  return path;
}

/**
 * A file too large to read, of any size: zeroed at its name, then unlinked. Stopped (a shutdown),
 * the file stays for the next start, which zeroes it again; false then.
 */
async function zeroThenRemove(path: string, fd: number, stop: AbortSignal): Promise<boolean> {
  let dev: number;
  let ino: number;
  try {
    ({ dev, ino } = fstatSync(fd));
  } catch (err) {
    closeSync(fd);
    notZeroed(path, err);
    return false;
  }
  try {
    await zeroOpen(fd, { stop, names: 1 });
  } catch (err) {
    if (stop.aborted) return false;
    notZeroed(path, err);
  }
  try {
    // Renamed meanwhile (the new log's rotation): whatever now holds the name is not this file.
    const now = lstatSync(path);
    if (now.dev === dev && now.ino === ino) rmSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return true;
    logger.warn(`the earlier log ${path} could not be removed: ${(err as Error).message}`);
    return false;
  }
}

const yes = () => true;

function notZeroed(path: string, err: unknown): true {
  logger.warn(`the earlier log ${path} was not zeroed: ${(err as Error).message}`);
  return true;
}
