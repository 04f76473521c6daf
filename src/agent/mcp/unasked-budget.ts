/**
 * What an MCP server may send that no call of the core asked for: notifications (log
 * messages, progress), requests of its own, answers to no request, lines that are not JSON-RPC
 * (docs/agent.md, MCP servers). Parsing them is the core's work on its main loop, so a server
 * sending them without end would keep the core busy for as long as it runs: the budget is a
 * bucket of bytes that refills at a steady rate, and a server that empties it is stopped.
 */
export interface UnaskedLimits {
  /** What may arrive at once: the bucket's size. */
  burstBytes: number;
  /** What may go on arriving: the bucket refills at this rate. */
  bytesPerSecond: number;
}

/**
 * Far above what a legitimate server sends unasked (a progress notification of a few hundred
 * bytes a second, log lines); a flood of 1 MB lines empties it in a handful of lines. Answers to
 * the core's own requests are not counted: a tool's 10 MB result is asked for.
 */
export const UNASKED_LIMITS: UnaskedLimits = { burstBytes: 4 * 1024 * 1024, bytesPerSecond: 256 * 1024 };

/** What one message costs at least: a flood of tiny lines is paid for per line, not only per byte. */
export const MIN_MESSAGE_COST = 512;

export class UnaskedBudget {
  private level: number;
  private at: number;

  constructor(
    readonly limits: UnaskedLimits,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.level = limits.burstBytes;
    this.at = now();
  }

  /** Charges one unasked message of `bytes`; false once the server has sent more than it may. */
  take(bytes: number): boolean {
    this.refill();
    this.level -= Math.max(bytes, MIN_MESSAGE_COST);
    return this.level >= 0;
  }

  /** Whether `bytes` more could still be charged: a line still arriving that cannot be an answer. */
  room(bytes: number): boolean {
    this.refill();
    return bytes <= this.level;
  }

  private refill(): void {
    const t = this.now();
    const { burstBytes, bytesPerSecond } = this.limits;
    this.level = Math.min(burstBytes, this.level + ((t - this.at) / 1000) * bytesPerSecond);
    this.at = t;
  }
}

/**
 * Why a server that emptied the budget is killed. One budget holds its stderr and what its
 * stdout sends unasked, so the stream read last is not to blame: 100 KB of stderr after 1 MB of
 * notifications was logged as "wrote to stderr over 1 MiB".
 */
export function overspentWhy({ burstBytes, bytesPerSecond }: UnaskedLimits): string {
  return `it sent more than any call asked for (notifications, its own requests, answers to none, and stderr together): over ${burstBytes} bytes at once or ${bytesPerSecond} bytes a second`;
}
