import { CoreError, isCoreError } from "../protocol/errors.ts";
import { causeText } from "../util/cause-text.ts";
import { HubBadAnswer, HubError, HubUnreachable } from "./hub-client.ts";
import { type PullWhere, pullError } from "./pull-errors.ts";

const DISK_CODES = new Set(["ENOSPC", "EDQUOT", "EACCES", "EROFS", "EIO", "EFBIG"]);

/**
 * The request's own abort signal: the caller's cancel, no byte for `ms`, or an oversized body.
 * Explains a failure as cancelled, stalled, or a cut connection (the partial, when it has bytes, is kept in each).
 */
export class StallGuard {
  private readonly ac = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stalled = false;
  private readonly onAbort = () => this.ac.abort();

  constructor(
    private readonly outer: AbortSignal,
    private readonly ms: number,
  ) {
    if (outer.aborted) this.ac.abort();
    else outer.addEventListener("abort", this.onAbort, { once: true });
    this.touch();
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Ends the request now (an oversized body); not a stall, not a cancel. */
  abortNow(): void {
    this.ac.abort();
  }

  touch(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.stalled = true;
      this.ac.abort();
    }, this.ms);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.outer.removeEventListener("abort", this.onAbort);
  }

  explain(err: unknown, where: PullWhere, done: number, total: number): unknown {
    // A partial with no byte is dropped (download.ts dropIfEmpty): only one with bytes is kept.
    if (this.outer.aborted)
      return new CoreError(
        "cancelled",
        `the pull of ${where.repo} ${where.file} was cancelled${done > 0 ? "; the partial download is kept" : " before its first byte"}`,
        { bytes_done: done, total },
      );
    if (isCoreError(err)) return err;
    const keep = done > 0 ? "; the partial download is kept, pull again to resume" : "; pull again";
    if (this.stalled)
      return pullError(
        where,
        "connection_lost",
        `no data for ${this.ms >= 1000 ? `${Math.round(this.ms / 1000)} s` : `${this.ms} ms`} after ${done} of ${total} bytes${keep}`,
        { bytes_done: done, total },
      );
    if (err instanceof HubError || err instanceof HubUnreachable || err instanceof HubBadAnswer)
      return undefined;
    // The disk's failures, not the connection's: writeFailure names them (EFBIG: a FAT32 cache).
    const code = (err as NodeJS.ErrnoException)?.code;
    if (code !== undefined && DISK_CODES.has(code)) return undefined;
    return pullError(
      where,
      "connection_lost",
      `the connection broke after ${done} of ${total} bytes (${causeText(err, 120)})${keep}`,
      { bytes_done: done, total },
    );
  }
}
