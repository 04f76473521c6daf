import { fstatSync, readFileSync, writeSync } from "node:fs";
import { isatty } from "node:tty";
import { stripVTControlCharacters } from "node:util";
import { type CommandDef, renderUsage } from "citty";
import { CoreError } from "../protocol/errors.ts";
import { within } from "../util/within.ts";

/**
 * Colour only for a person at a terminal: never on a pipe or file, never when NO_COLOR is set
 * to anything (https://no-color.org).
 */
export function colorFor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(stream.isTTY) && !env.NO_COLOR;
}

/**
 * A command's usage on `stream`: stdout for `--help` (a document: its failure thrown, as
 * `writeDocument`'s), stderr beside a usage error. citty's own showUsage always writes stdout and
 * colours whenever CI/TEST/NO_COLOR=1 are absent, even on a pipe.
 */
export async function writeUsage(
  stream: NodeJS.WriteStream,
  cmd: CommandDef,
  parent?: CommandDef,
): Promise<void> {
  const text = await renderUsage(cmd, parent);
  const shown = `${colorFor(stream) ? text : stripVTControlCharacters(text)}\n\n`;
  if (stream === process.stdout) writeDocument(shown);
  else stream.write(shown);
}

/**
 * A command's whole document (models, plan, doctor) on stdout. To a file or a device
 * (`> out.json`) it is written at once and a failure thrown: Bun tells such a write's ENOSPC
 * only after the stream has finished, too late for the exit code, so `models --json > out.json`
 * on a full disk exited 0 with nothing written. A pipe or a terminal goes through the stream (a
 * reader that left is its own choice; `flushed` waits for the rest).
 */
export function writeDocument(text: string, fd = 1): void {
  if (fd === 1 && stdoutClosedAtStart()) throw unwritten("the output could not be written: stdout is closed");
  if (!writtenDirectly(fd)) {
    process.stdout.write(text);
    return;
  }
  try {
    writeAll(fd, text);
  } catch (err) {
    throw unwritten(`the output could not be written to stdout (${(err as Error).message})`);
  }
}

const unwrittenErrors = new WeakSet<Error>();

function unwritten(message: string): CoreError {
  const err = new CoreError("internal_error", message);
  unwrittenErrors.add(err);
  return err;
}

/** Whether `err` is `writeDocument`'s own failure: stdout takes no error document after it either. */
export const isUnwritten = (err: unknown): boolean => err instanceof Error && unwrittenErrors.has(err);

/** Whether `fd` is a file or a device other than a terminal: written with writeSync, failures heard at once. */
function writtenDirectly(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return (st.isFile() || st.isCharacterDevice()) && !isatty(fd);
  } catch {
    return false; // no stdout to look at: the stream decides, as for any other
  }
}

/**
 * Whether the process began with stdout closed (`>&-`): the runtime opens /dev/null in its place,
 * where every write "succeeds", and marks it close-on-exec, which no stdout inherited through an
 * exec can be. Linux only (/proc); elsewhere a closed stdout reads as /dev/null.
 */
export function stdoutClosedAtStart(): boolean {
  try {
    const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync("/proc/self/fdinfo/1", "utf8"))?.[1];
    return flags !== undefined && (Number.parseInt(flags, 8) & O_CLOEXEC) !== 0;
  } catch {
    return false;
  }
}

/** Linux's O_CLOEXEC as /proc's fdinfo shows open flags (octal 02000000). */
const O_CLOEXEC = 0o2000000;

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
}

/** A stream a command writes to as it goes, which may go away under it. */
export interface ClosableOutput {
  write(text: string): void;
  /** True once a write failed: the reader is gone and nothing more is written. */
  readonly closed: boolean;
  /** The failure that closed it, when one was told (EPIPE: its reader left; ENOSPC: a full disk). */
  readonly failure: Error | undefined;
}

/**
 * stdout for a command that writes while it works (pull's progress): a reader that went away
 * (`| head -1`, EPIPE) calls `onClosed` once and silences later writes. Bun throws the EPIPE
 * from write() or reports it as an 'error' event; either, unheard, ended the process with a
 * trace and left the pull's lock behind. To a file or a device each write is direct, as a
 * document's: through the stream a full disk's ENOSPC came after the pull had ended, exit 0. A
 * stdout closed from the start (`>&-`) closes it at the first write, as a reader that left.
 */
export function closableOutput(
  onClosed: () => void,
  stream: NodeJS.WriteStream = process.stdout,
  direct = stream === process.stdout && writtenDirectly(1),
  closedAtStart = stream === process.stdout && stdoutClosedAtStart(),
): ClosableOutput {
  let failure: Error | undefined;
  let closed = false;
  const close = (err?: unknown) => {
    if (closed) return;
    closed = true;
    if (err instanceof Error) failure = err;
    onClosed();
  };
  stream.on("error", close);
  const written = (err?: Error | null) => {
    if (err) close(err);
  };
  return {
    write(text: string) {
      if (closed) return;
      if (closedAtStart) return close(Object.assign(new Error("stdout is closed"), { code: "EBADF" }));
      try {
        if (direct) writeAll(1, text);
        else stream.write(text, written);
      } catch (err) {
        close(err);
      }
    },
    get closed() {
      return closed;
    },
    get failure() {
      return failure;
    },
  };
}

/**
 * Resolves once what was written to `stream` has left the process, or its reader is gone. Bun's
 * process.exit drops output still queued in the process: `local-ai models --json | jq` with a
 * reader slower than the writer got the document's first 64 KiB (a pipe's buffer), and exit 0.
 * A reader that keeps the pipe open and reads nothing holds the exit, as it holds any writer.
 */
export function flushed(stream: NodeJS.WritableStream & { errored?: unknown }): Promise<void> {
  return new Promise((resolve) => {
    if (stream.errored) return resolve();
    // Heard: an 'error' nobody hears would end the process with a trace (EPIPE, reader gone).
    stream.once("error", () => resolve());
    stream.end(() => resolve());
  });
}

/** A command's exit code when a signal stopped it (README "Exit codes"). */
export const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143 } as const;

/** How long a command stopped by a signal waits for its reader before it exits all the same. */
export const SIGNALLED_FLUSH_MS = 2000;

/**
 * The flush before a command's exit (`flushed`), bounded when a signal stopped it (exit 130 or
 * 143): `timeout` sends one SIGTERM, and `pull --json` whose reader had stopped reading stayed
 * alive on its queued progress lines until a second one.
 */
export async function flushedForExit(
  stream: NodeJS.WritableStream & { errored?: unknown },
  code: number,
  boundMs = SIGNALLED_FLUSH_MS,
): Promise<void> {
  const flush = flushed(stream);
  const signalled = code === SIGNAL_EXIT.SIGINT || code === SIGNAL_EXIT.SIGTERM;
  await (signalled ? within(flush, boundMs, undefined) : flush);
}
