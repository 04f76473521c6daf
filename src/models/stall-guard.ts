import { cancelledError, isCoreError } from "../protocol/errors.ts";
import { HubBadAnswer, HubError, HubUnreachable } from "./hub-client.ts";
import { type PullWhere, pullError } from "./pull-errors.ts";

/**
 * The least a download must bring in each window of `windowMs`. The stall limit alone let a
 * server that sends a byte every 59 s keep a pull alive for ever; a floor this low (about 3.5
 * kB/s by default) ends only a trickle, never a slow line.
 */
export interface ProgressFloor {
  bytes: number;
  windowMs: number;
}

export const DEFAULT_FLOOR: ProgressFloor = { bytes: 1024 * 1024, windowMs: 5 * 60_000 };

/**
 * The request's own abort signal: the caller's cancel, no byte for `ms`, fewer than the floor's
 * bytes in one of its windows, or an oversized body. Explains a failure as cancelled, stalled,
 * too slow, or a cut connection (the partial is kept in each).
 */
export class StallGuard {
  private readonly ac = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly window: ReturnType<typeof setInterval>;
  private stalled = false;
  /** Bytes in the window running now; the bytes of the window that fell short once one has. */
  private moved = 0;
  private tooSlow: number | null = null;
  private readonly onAbort = () => this.ac.abort();

  constructor(
    private readonly outer: AbortSignal,
    private readonly ms: number,
    private readonly floor: ProgressFloor = DEFAULT_FLOOR,
  ) {
    if (outer.aborted) this.ac.abort();
    else outer.addEventListener("abort", this.onAbort, { once: true });
    this.arm();
    this.window = setInterval(() => {
      if (this.moved < floor.bytes) {
        this.tooSlow = this.moved;
        this.ac.abort();
      }
      this.moved = 0;
    }, floor.windowMs);
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Ends the request now (an oversized body); not a stall, not a cancel. */
  abortNow(): void {
    this.ac.abort();
  }

  /** `bytes` more have arrived. */
  touch(bytes: number): void {
    this.moved += bytes;
    this.arm();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.stalled = true;
      this.ac.abort();
    }, this.ms);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    clearInterval(this.window);
    this.outer.removeEventListener("abort", this.onAbort);
  }

  explain(err: unknown, where: PullWhere, done: number, total: number): unknown {
    if (this.outer.aborted)
      return cancelledError(
        `the pull of ${where.repo} ${where.file} was cancelled; the partial download is kept`,
      );
    if (isCoreError(err)) return err;
    const keep = "; the partial download is kept, pull again to resume";
    if (this.stalled)
      return pullError(
        where,
        "connection_lost",
        `no data for ${span(this.ms)} after ${done} of ${total} bytes${keep}`,
        { bytes_done: done, total },
      );
    if (this.tooSlow !== null)
      return pullError(
        where,
        "connection_lost",
        `too slow: fewer than ${this.floor.bytes} bytes in ${span(this.floor.windowMs)} (${this.tooSlow}) after ${done} of ${total} bytes${keep}`,
        { bytes_done: done, total },
      );
    if (err instanceof HubError || err instanceof HubUnreachable || err instanceof HubBadAnswer)
      return undefined;
    const code = (err as NodeJS.ErrnoException)?.code;
    if (code === "ENOSPC" || code === "EDQUOT" || code === "EACCES" || code === "EROFS" || code === "EIO")
      return undefined;
    return pullError(
      where,
      "connection_lost",
      `the connection broke after ${done} of ${total} bytes (${connectionCause(err)})${keep}`,
      { bytes_done: done, total },
    );
  }
}

function span(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
}

function connectionCause(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === "string" && e.code) return e.code;
  return String(e?.message ?? err)
    .split("\n")[0]!
    .slice(0, 120);
}
