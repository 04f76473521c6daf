import { closeSync, constants, existsSync, fstatSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { logger } from "../util/logger.ts";
import { ensurePrivateDir, openPrivateFile } from "../util/private-fs.ts";
import { escapedCut } from "../util/terminal-text.ts";
import { prunePathLogs } from "./log-prune.ts";
import type { SecretHider } from "./log-redact.ts";
import { redactEarlierLogs } from "./log-scrub.ts";

/** The last lines of llama-server's output, bounded by count and by bytes per line. */
export class LogTail {
  private readonly lines: string[] = [];

  constructor(
    private readonly maxLines = 200,
    private readonly maxLineChars = 2000,
  ) {}

  push(line: string): void {
    this.lines.push(escapedCut(line, this.maxLineChars));
    if (this.lines.length > this.maxLines) this.lines.splice(0, this.lines.length - this.maxLines);
  }

  last(n = this.maxLines): string[] {
    return this.lines.slice(-n);
  }

  clear(): void {
    this.lines.length = 0;
  }
}

/** The log of a llama-server the core launches: `llama-server-<instance>.log` for a named instance. */
export function llamaServerLog(
  dir: string,
  settings: { logMaxBytes: number; logFiles: number },
  instance?: string,
): RotatingLog {
  const name = instance ? `llama-server-${instance}.log` : undefined;
  return new RotatingLog(dir, settings.logMaxBytes, settings.logFiles, name);
}

/**
 * llamaServerLog made before the plan, so its file work overlaps the probe's: none where it cannot
 * be made (a `logs` that is a file, a read-only data_dir), and the launcher makes it again after
 * the plan. Its mkdir error came first, and a user with a missing model was told of an EEXIST,
 * not model_missing naming the model.
 */
export function llamaServerLogAhead(
  dir: string,
  settings: { logMaxBytes: number; logFiles: number },
  instance?: string,
): RotatingLog | undefined {
  try {
    return llamaServerLog(dir, settings, instance);
  } catch {
    return undefined;
  }
}

/**
 * llama-server.log under data_dir/logs, rotated to .1 … .(files-1) once it passes maxBytes.
 * Synchronous writes: the volume is small (a few lines per request) and order must hold.
 * The folder is 0700 and the files 0600: the log quotes prompts and paths.
 */
export class RotatingLog {
  private fd: number | undefined;
  private size = 0;
  readonly path: string;

  constructor(
    dir: string,
    private readonly maxBytes: number,
    private readonly files: number,
    name = "llama-server.log",
  ) {
    this.path = join(dir, name);
    ensurePrivateDir(dir);
    prunePathLogs(dir, name);
    try {
      // Its zeroing runs on off the loop; the stop path waits for it (earlierLogsSettled).
      void redactEarlierLogs(dir);
    } catch (err) {
      logger.warn(
        `could not put the earlier llama-server logs in ${dir} through the redactor: ${(err as Error).message}`,
      );
    }
  }

  write(text: string): void {
    try {
      // Removed under us (its folder cleared to free space): lines written on would be lost with it.
      if (this.fd !== undefined && fstatSync(this.fd).nlink === 0) this.close();
      if (this.fd === undefined) this.open();
      const bytes = Buffer.from(text);
      if (this.size > 0 && this.size + bytes.length > this.maxBytes) this.rotate();
      writeSync(this.fd as number, bytes);
      this.size += bytes.length;
    } catch {
      // A full disk must not take the supervisor down; the in-memory tail still holds the lines.
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private open(): void {
    ensurePrivateDir(dirname(this.path));
    // Never through a link: a planted one fails here and the line stays in the tail only.
    this.fd = openPrivateFile(this.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT);
    this.size = fstatSync(this.fd).size;
  }

  private rotate(): void {
    this.close();
    if (this.files <= 1) {
      rmSync(this.path, { force: true });
    } else {
      for (let i = this.files - 1; i >= 1; i--) {
        const from = i === 1 ? this.path : `${this.path}.${i - 1}`;
        if (existsSync(from)) renameSync(from, `${this.path}.${i}`);
      }
    }
    this.open();
  }
}

/**
 * Splits a byte stream into lines, decoding UTF-8 across chunk boundaries. A line longer than
 * `maxLineChars` is handed on in parts of that length as it comes: a child writing without a
 * newline must not grow the core's memory (the log and the tail keep the parts like lines);
 * `cut` says such a part is one, more of its line following. `hide`: a secret the cut would split
 * passes whole in neither part, so a long line's secrets are hidden before it is cut.
 */
export async function readLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string, cut: boolean) => void,
  maxLineChars = 64 * 1024,
  hide?: SecretHider,
): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  /** Hands on parts of the line begun in `pending` while more than the limit and `hold` is there. */
  const cut = (hold: number) => {
    if (pending.length <= maxLineChars + hold) return;
    if (hide) pending = hide(pending);
    let start = 0;
    for (; pending.length - start > maxLineChars + hold; start += maxLineChars)
      onLine(pending.slice(start, start + maxLineChars), true);
    pending = pending.slice(start);
  };
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += decoder.decode(value, { stream: true });
      let start = 0;
      for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n", start)) {
        onLine(pending.slice(start, nl).replace(/\r$/, ""), false);
        start = nl + 1;
      }
      pending = pending.slice(start);
      // Held past the cut: a secret begun before it has arrived whole when the part is cut.
      cut(hide?.longest ?? 0);
    }
  } catch {
    // The pipe broke with the process; what arrived is already handed on.
  }
  pending += decoder.decode();
  cut(0);
  if (pending) onLine(pending, false);
}
