/**
 * The signals that stop serve-stdio (docs/protocol.md#lifecycle), held from the process's first
 * module until the stdio loop listens: without a listener Bun's default ended the core at once,
 * exit 143, when the host stopped it during its first ~50 ms (the CLI's modules loading).
 * Imported first by src/index.ts for that reason. A line written before such a signal is still
 * left unanswered when the stop completes before the loop reads it (docs/protocol.md#lifecycle).
 */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

let first: string | undefined;
let unhold: (() => void) | undefined;

/** Hears the stop signals and keeps the first, until `releaseStopSignals`. */
export function holdStopSignals(): void {
  if (unhold) return;
  const listeners = STOP_SIGNALS.map((s) => {
    const l = () => {
      first ??= s;
    };
    process.on(s, l);
    return [s, l] as const;
  });
  unhold = () => {
    for (const [s, l] of listeners) process.off(s, l);
  };
}

/** Ends the hold (once the loop's own listeners are on); the signal that came meanwhile, if any. */
export function releaseStopSignals(): string | undefined {
  unhold?.();
  unhold = undefined;
  const signal = first;
  first = undefined;
  return signal;
}

// Only serve-stdio: the other commands keep their own handling (cli/run.ts) or the default.
if (process.argv[2] === "serve-stdio") holdStopSignals();
