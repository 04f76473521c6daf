import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { within } from "../util/within.ts";

/**
 * Hashes a file while the download is still growing it: a worker thread reads right behind the
 * writer (from the page cache, up to the bytes the writer says are on disk) and hashes them, so
 * the transfer and the hash run side by side instead of one after the other. A gigabyte costs the best part of a CPU
 * second to hash and as much to receive and write: in series the pull would run at half the
 * speed of a plain download (docs/performance.md, "pull"). The worker starts at byte 0, so a
 * resumed download's hash covers the partial as well.
 */

export interface Digests {
  sha256: string;
  /** git's blob id (sha1 of `blob <size>\0` + content), when asked for. */
  gitSha1?: string;
}

export interface TailHash {
  /** Bytes hashed so far. */
  position(): number;
  /** The first `bytes` of the file are written: the worker may read them. */
  advance(bytes: number): void;
  /** The writer is done and the file is `length` bytes long: resolves once all of it is hashed. */
  finish(length: number): Promise<Digests>;
  /** Stops without a digest (cancel, restart). Safe to call more than once. */
  stop(): void;
  /**
   * Resolves once the file is closed and nothing reads it any more (after stop or finish), or
   * after ENDED_WAIT_MS: a read hung on a dead drive must not hold a cancelled pull's answer.
   */
  ended(): Promise<void>;
}

/** How long `ended` waits for a stopped worker; one stuck in a read is let go (it closes the file when the read returns). */
const ENDED_WAIT_MS = 2_000;

export interface TailHashOptions {
  /** Also compute git's blob id for a file of this size (files kept in git, not LFS). */
  gitBlobSize?: number | undefined;
  /** Hash on this thread once the writer is done (where worker threads are unavailable). */
  inline?: boolean | undefined;
  /** Bytes already on disk when the hash starts (a partial being resumed). */
  written?: number;
}

// Shared state: [0] the final length (-1 while the writer runs, -2 to stop), [1] bytes hashed,
// [2] bytes the writer has put on disk (the worker never reads past them).
const FINAL = 0;
const DONE = 1;
const WRITTEN = 2;
const WRITING = -1n;
const STOP = -2n;

// The worker: reads behind the writer in 4 MiB pieces, naps 2 ms when it has caught up.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const fs = require("node:fs");
const shared = new BigInt64Array(workerData.shared);
const nap = new Int32Array(new SharedArrayBuffer(4));
const sha256 = createHash("sha256");
const git = workerData.gitPrefix === null ? null : createHash("sha1").update(workerData.gitPrefix);
const buf = Buffer.allocUnsafe(4 * 1024 * 1024);
let fd = -1;
let reply = null;
try {
  // Never a blocking open, never anything but a regular file (a FIFO swapped in is refused).
  fd = fs.openSync(workerData.path, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK || 0));
  if (!fs.fstatSync(fd).isFile()) throw new Error("it is not a regular file");
  let pos = 0;
  for (;;) {
    const final = Atomics.load(shared, 0);
    if (final === -2n) break;
    const limit = final >= 0n ? Number(final) : Number.POSITIVE_INFINITY;
    const size = Math.min(Number(Atomics.load(shared, 2)), limit);
    if (size > pos) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, size - pos), pos);
      if (n === 0) throw new Error("the file shrank while it was being hashed");
      const view = buf.subarray(0, n);
      sha256.update(view);
      if (git) git.update(view);
      pos += n;
      Atomics.store(shared, 1, BigInt(pos));
      continue;
    }
    if (final >= 0n && pos >= limit) {
      reply = { sha256: sha256.digest("hex"), gitSha1: git ? git.digest("hex") : undefined };
      break;
    }
    if (final >= 0n) throw new Error("the writer said more bytes were written than it wrote");
    Atomics.wait(nap, 0, 0, 2);
  }
} catch (err) {
  reply = { error: String(err && err.message || err) };
} finally {
  // Closed here on every way out, before the answer: the descriptor is the process's, not
  // this thread's, and outlives it (a terminate between open and close leaked it for good).
  if (fd >= 0) fs.closeSync(fd);
}
if (reply) parentPort.postMessage(reply);`;

export function startTailHash(path: string, options: TailHashOptions = {}): TailHash {
  const gitPrefix = options.gitBlobSize === undefined ? null : `blob ${options.gitBlobSize}\0`;
  if (!options.inline) {
    try {
      return workerTailHash(path, gitPrefix, options.written ?? 0);
    } catch {
      // No worker threads here: hash after the download instead (slower, same result).
    }
  }
  return inlineHash(path, gitPrefix);
}

function workerTailHash(path: string, gitPrefix: string | null, written: number): TailHash {
  const { Worker } = require("node:worker_threads") as typeof import("node:worker_threads");
  const shared = new BigInt64Array(new SharedArrayBuffer(24));
  shared[FINAL] = WRITING;
  shared[WRITTEN] = BigInt(written);
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { path, gitPrefix, shared: shared.buffer },
  });
  const result = new Promise<Digests>((resolve, reject) => {
    worker.once("message", (m: { sha256?: string; gitSha1?: string; error?: string }) => {
      if (m.error) reject(new Error(`hashing ${path}: ${m.error}`));
      else resolve({ sha256: m.sha256!, ...(m.gitSha1 ? { gitSha1: m.gitSha1 } : {}) });
    });
    worker.once("error", reject);
    worker.once("exit", () => reject(new Error(`hashing ${path}: the worker stopped`)));
  });
  result.catch(() => {});
  const ended = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  let waitedEnd: Promise<void> | undefined;
  // No terminate: one landing between the worker's open and its close leaked the descriptor for
  // the life of the core (a thread's files are the process's). Told to stop, it sees the flag
  // within a read or a 2 ms nap, closes the file and ends.
  const stop = () => {
    Atomics.store(shared, FINAL, STOP);
  };
  return {
    position: () => Number(Atomics.load(shared, DONE)),
    advance: (bytes) => {
      Atomics.store(shared, WRITTEN, BigInt(bytes));
    },
    finish: async (length) => {
      Atomics.store(shared, WRITTEN, BigInt(length));
      Atomics.store(shared, FINAL, BigInt(length));
      try {
        return await result;
      } finally {
        stop();
      }
    },
    // One wait a hash: a failed pull asks it at each of its clean-ups, each waited 2 s more.
    ended: () => (waitedEnd ??= within(ended, ENDED_WAIT_MS, undefined)),
    stop,
  };
}

function inlineHash(path: string, gitPrefix: string | null): TailHash {
  let done = 0;
  let stopped = false;
  return {
    position: () => done,
    advance: () => {},
    finish: async (length) => {
      const sha256 = createHash("sha256");
      const git = gitPrefix === null ? null : createHash("sha1").update(gitPrefix);
      if (length > 0) {
        for await (const chunk of createReadStream(path, { start: 0, end: length - 1 })) {
          if (stopped) throw new Error("stopped");
          sha256.update(chunk as Buffer);
          git?.update(chunk as Buffer);
          done += (chunk as Buffer).length;
        }
      }
      const gitSha1 = git?.digest("hex");
      return { sha256: sha256.digest("hex"), ...(gitSha1 ? { gitSha1 } : {}) };
    },
    stop: () => {
      stopped = true;
    },
    // The read stream closes its file as the loop ends or throws.
    ended: () => Promise.resolve(),
  };
}
