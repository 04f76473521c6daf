import { randomBytes } from "node:crypto";
import { lstatSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { pidAlive } from "../platform/pid-alive.ts";
import { pidSpace, writtenRelation } from "../platform/pid-space.ts";
import { logger } from "../util/logger.ts";
import { namesIn } from "../util/names-in.ts";
import { ensurePrivateTree, writePrivateFile } from "../util/private-fs.ts";
import { readSmallFile } from "../util/read-file.ts";
import { syncFolder } from "./atomic.ts";
import { zeroFile, zeroFileSync } from "./scrub-file.ts";

/**
 * An export to a path (`sessions.export`, store/export-file.ts) writes a temp file beside it in
 * the host's folder: a core killed mid-write (SIGKILL, a power cut) leaves it there, a hidden
 * part of the conversation nothing would ever remove. So each export under way is noted under
 * data_dir/run/exports (`<pid>-<hex>.json`: the temp file's path), and the next start removes
 * what a dead core's notes name (docs/protocol.md, sessions.export).
 */
const NOTE = /^(\d+)-[0-9a-f]{12}\.json$/;
/** Only a name exportToFile gives its temp files is ever removed: `.<target>.<12 hex>.tmp`. */
const TEMP = /^\..+\.[0-9a-f]{12}\.tmp$/;

/** The most of a note read: it holds one path. */
const NOTE_BYTES = 64 * 1024;

const notesDir = (dataDir: string) => join(dataDir, "run", "exports");
/** This process's notes of exports under way: never swept (an export may come before the sweep). */
const live = new Set<string>();

/**
 * The note of an export under way, synced before the temp file exists; returns its removal. A
 * note that cannot be written (data_dir full or not writable) does not fail an export to a path
 * elsewhere: it goes on unnoted, as before notes existed, and says so in the log. `start`: this
 * process's start as the OS tells it (runtime/proc-info's `start_time`), where known.
 */
export function noteExportTemp(dataDir: string, tmp: string, start?: string | null): () => void {
  let note: string | undefined;
  try {
    const dir = ensurePrivateTree(dataDir, "run", "exports");
    note = join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.json`);
    live.add(note);
    writePrivateFile(note, `${JSON.stringify({ tmp, ...(start ? { start } : {}), space: pidSpace() })}\n`);
    syncFolder(note);
    syncFolder(dir);
  } catch (err) {
    // A full disk makes the note and refuses its bytes: an empty one would stay until the next start.
    if (note !== undefined) {
      rmQuietly(note);
      live.delete(note);
    }
    logger.warn(
      `an export's temp file ${tmp} is not noted under data_dir (${(err as Error).message}): a core killed during it would leave it`,
    );
    return () => {};
  }
  const made = note;
  // Never a throw: it runs after the rename (the export done) and in the export's clean-up, where a
  // throw took the place of the export's answer with a raw error. One left goes at the next start.
  return () => {
    try {
      dropNote(made);
    } catch (err) {
      logger.warn(`an export's note ${made} could not be removed: ${(err as Error).message}`);
    }
    live.delete(made);
  };
}

/**
 * A note zeroed, then removed: it names the temp file beside the host's target, so the target's
 * name (a conversation's title, often) was left in the freed blocks. zeroFileSync zeroes only a
 * regular file, never through a link nor waiting on a FIFO; one it refuses is removed as it is.
 */
function dropNote(note: string): void {
  try {
    zeroFileSync(note);
  } catch {}
  rmSync(note, { force: true });
}

/**
 * A process that started this long after a note was written is not its writer: room for `ps`'s
 * one-second start times and a clock that stepped a little.
 */
const STARTED_AFTER_SLACK_MS = 5_000;

/**
 * At start-up: the temp files of exports a dead core left (zeroed first), and their notes, removed. `startedAt`:
 * when a pid's process started by the wall clock, or null (runtime/proc-info's `processStartedAt`).
 * After a power cut the note's pid is often another process's by the next boot: one that started
 * after the note was written did not write it, and the temp file is removed, not kept as long as
 * that process lives (a daemon: for good). `startOf`: a pid's start as the OS tells it, or null.
 */
export async function sweepExportTemps(
  dataDir: string,
  startedAt: (pid: number) => number | null = () => null,
  startOf: (pid: number) => string | null = () => null,
  space = pidSpace(),
): Promise<void> {
  for (const name of namesIn(notesDir(dataDir))) {
    const m = NOTE.exec(name);
    const note = join(notesDir(dataDir), name);
    if (!m || live.has(note)) continue;
    // Another pid space's note is judged by its age alone: its pid names another process here
    // (often pid 1, which lives for good), whose life said its writer's temp was kept for ever.
    const foreign = foreignAge(note, space);
    if (
      foreign === undefined ? writerAlive(Number(m[1]), note, startedAt, startOf) : foreign < FOREIGN_NOTE_MS
    )
      continue;
    try {
      // A small regular file only, never through a link: a FIFO here blocked the core's start.
      const { tmp } = JSON.parse(readSmallFile(note, NOTE_BYTES, { follow: false })) as { tmp: unknown };
      if (
        typeof tmp === "string" &&
        TEMP.test(basename(tmp)) &&
        lstatSync(tmp, { throwIfNoEntry: false })?.isFile()
      ) {
        // Zeroed on the disk first, as a failed export's is (store/scrub-file.ts).
        await zeroFile(tmp).catch(() => {});
        rmSync(tmp, { force: true });
        logger.info(`removed the temp file of an export a stopped core left unfinished: ${tmp}`);
      }
    } catch (err) {
      logger.warn(`an unfinished export's note ${note} could not be acted on: ${(err as Error).message}`);
    }
    // One that cannot go (a folder of its name) is left, never the rest of the sweep with it.
    try {
      dropNote(note);
    } catch (err) {
      logger.warn(`an unfinished export's note ${note} could not be removed: ${(err as Error).message}`);
    }
  }
}

/**
 * Whether the core that wrote `note` may still be running: its pid alive, and its start the one the
 * note recorded, or else before the note by the wall clock. The recorded start comes first: a clock
 * stepped forward since (NTP at boot, a VM resumed) shows the writer started after its own note.
 */
function writerAlive(
  pid: number,
  note: string,
  startedAt: (pid: number) => number | null,
  startOf: (pid: number) => string | null,
): boolean {
  if (pid === process.pid || !pidAlive(pid)) return false;
  const recorded = recordedStart(note);
  if (recorded !== undefined && startOf(pid) === recorded) return true;
  const started = startedAt(pid);
  const written = lstatSync(note, { throwIfNoEntry: false })?.mtimeMs;
  return started === null || written === undefined || started <= written + STARTED_AFTER_SLACK_MS;
}

/** The writer's start a note recorded (`noteExportTemp`), or undefined. */
function recordedStart(note: string): string | undefined {
  const { start } = noteFields(note);
  return typeof start === "string" ? start : undefined;
}

/** A note of another pid space this young is its writer's, whatever its pid names here. */
const FOREIGN_NOTE_MS = 24 * 3_600_000;

/**
 * How long ago a note was written where pids are not this core's (another container or machine on
 * the data folder, platform/pid-space.ts): one younger than FOREIGN_NOTE_MS may be its writer's
 * still. Undefined for a note of this pid space or none (an earlier version's): its pid tells.
 */
function foreignAge(note: string, space: string): number | undefined {
  const theirs = noteFields(note).space;
  if (typeof theirs !== "string") return undefined;
  const written = lstatSync(note, { throwIfNoEntry: false })?.mtimeMs;
  const where = writtenRelation(theirs, space, written ?? Number.NEGATIVE_INFINITY);
  // This host's previous boot (a crash, a reboot), written before this boot began: its writer is
  // gone, whatever its pid names now.
  if (where !== "other") return where === "own" ? undefined : Number.POSITIVE_INFINITY;
  return written === undefined ? Number.POSITIVE_INFINITY : Date.now() - written;
}

function noteFields(note: string): { start?: unknown; space?: unknown } {
  try {
    return JSON.parse(readSmallFile(note, NOTE_BYTES, { follow: false })) as { start?: unknown };
  } catch {
    return {};
  }
}

/** A file removed, its own failure (ENAMETOOLONG…) never taking the place of the caller's. */
export function rmQuietly(path: string): void {
  try {
    rmSync(path, { force: true });
  } catch {}
}
