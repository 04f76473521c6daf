/** When one streamed reply's pieces arrived, on the bench's clock (performance.now()). */
export interface StreamTiming {
  /** The request left the bench. */
  sent: number;
  /** First and last content piece (an SSE delta, or an llm_chunk). */
  first: number;
  last: number;
  /** Content pieces received. */
  pieces: number;
  /** Characters of text they carried, and of the first one. */
  chars: number;
  firstChars: number;
  /**
   * Tokens they carried, where a piece may carry several (the core joins the deltas that arrive
   * close together: docs/performance.md, "Joined pieces"); absent: one a piece.
   */
  tokens?: number;
  /** llama-server's own `timings.prompt_ms` for this reply, where it was seen. */
  promptMs?: number;
  /**
   * Through the core, where its log said when it wrote the request and read the first token
   * (`at=`): the core's own time on the first token's way, ms. `before`: the request's line
   * sent → the request written to llama-server; `after`: the first token read → the bench got
   * its line.
   */
  own?: { before: number; after: number };
}

export const ttft = (t: StreamTiming): number => t.first - t.sent;

/**
 * Time to first token less llama-server's own prompt evaluation: the prompt's time varies from
 * one request to the next by more than the core's share, so taking it out of both sides of a
 * pair leaves the transport and the core. NaN where the timing is unknown.
 */
export const ttftBeyondPrompt = (t: StreamTiming): number =>
  t.promptMs === undefined ? Number.NaN : ttft(t) - t.promptMs;

/** The core's own time on the first token (`own`), NaN where it is unknown. */
export const ownPath = (t: StreamTiming): number => (t.own ? t.own.before + t.own.after : Number.NaN);

/**
 * Characters of text per second between the first piece and the last (the first one starts the
 * clock): the same measure whether a piece carries one token or several.
 */
export const rate = (t: StreamTiming): number =>
  t.pieces > 1 && t.last > t.first ? ((t.chars - t.firstChars) * 1000) / (t.last - t.first) : Number.NaN;

/** Tokens the pieces carried. */
export const tokensOf = (t: StreamTiming): number => Math.max(1, t.tokens ?? t.pieces);

export function median(xs: number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** "median (min–max)" with `digits` decimals. */
export function spread(xs: number[], digits = 1): string {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return "n/a";
  const f = (x: number) => x.toFixed(digits);
  return `${f(median(s))} (${f(s[0] as number)}–${f(s.at(-1) as number)})`;
}

/**
 * An interval of at least 95% for the median of `xs`, from their order statistics and nothing
 * else (the count of values below the true median is binomial, n and ½): [x_j, x_(n+1−j)] with
 * the largest rank j whose tail P(X ≤ j−1) is at most 2.5%, as "[low, high]" with `digits`
 * decimals; "n/a" under 6 values, where no such interval exists. It says how far one run's median
 * may sit from the box's: a target inside the interval is not settled by that run.
 */
export function medianInterval(xs: number[], digits = 2): string {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  const n = s.length;
  let term = 0.5 ** n; // P(X = 0)
  let tail = term; // P(X ≤ i)
  let j = 0;
  for (let i = 0; tail <= 0.025 && i < n; ) {
    j = i + 1;
    i++;
    term = (term * (n - i + 1)) / i;
    tail += term;
  }
  if (j === 0) return "n/a";
  return `[${(s[j - 1] as number).toFixed(digits)}, ${(s[n - j] as number).toFixed(digits)}]`;
}
