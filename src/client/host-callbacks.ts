import type { LocalAiClientOptions } from "./client-options.ts";
import type { ClientLogger } from "./host-types.ts";

/**
 * The host's callbacks, made safe to call: a host's bug (a logger or an onExit that throws)
 * must neither escape into the host's process as an uncaught exception nor stop the client's
 * own bookkeeping halfway (docs/bootstrap.md "Host callbacks"). A throw is reported to the
 * logger; the logger's own throws are dropped.
 */

/** The options with `logger`, `onStderr`, `onExit` and `onRestart` wrapped so that none throws. */
export function guardHostCallbacks(options: LocalAiClientOptions): LocalAiClientOptions {
  const logger = guardedLogger(options.logger);
  return {
    ...options,
    logger,
    onStderr: guarded(logger, "onStderr", options.onStderr),
    onExit: guarded(logger, "onExit", options.onExit),
    onRestart: guarded(logger, "onRestart", options.onRestart),
  };
}

/** A logger that never throws. */
export function guardedLogger(logger: ClientLogger | undefined): ClientLogger {
  return {
    warn(message) {
      try {
        logger?.warn(message);
      } catch {}
    },
    debug(message) {
      try {
        logger?.debug?.(message);
      } catch {}
    },
  };
}

/** `fn` made safe to call: a throw goes to the logger as a warning naming the callback. */
export function guarded<A extends unknown[]>(
  logger: ClientLogger,
  name: string,
  fn: ((...args: A) => void) | undefined,
): ((...args: A) => void) | undefined {
  if (!fn) return undefined;
  return (...args: A) => {
    try {
      fn(...args);
    } catch (err) {
      logger.warn(`the host's ${name} callback threw: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
}
