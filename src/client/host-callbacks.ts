import type { LocalAiClientOptions } from "./client-options.ts";
import type { ClientLogger } from "./host-types.ts";

/**
 * The host's callbacks, made safe to call: a host's bug (a logger or an onExit that throws)
 * must neither escape into the host's process as an uncaught exception nor stop the client's
 * own bookkeeping halfway (docs/bootstrap.md "Host callbacks"). A throw is reported to the
 * logger; the logger's own throws are dropped.
 */

/** The options with `logger` and the `on…` callbacks wrapped so that none throws. */
export function guardHostCallbacks(options: LocalAiClientOptions): LocalAiClientOptions {
  const logger = guardedLogger(options.logger);
  return {
    ...options,
    logger,
    onStderr: guarded(logger, "onStderr", options.onStderr),
    onExit: guarded(logger, "onExit", options.onExit),
    onRestart: guarded(logger, "onRestart", options.onRestart),
    onFailed: guarded(logger, "onFailed", options.onFailed),
  };
}

/** A logger that never throws. */
export function guardedLogger(logger: ClientLogger | undefined): ClientLogger {
  return {
    warn(message) {
      try {
        dropRejection(logger?.warn(message));
      } catch {}
    },
    debug(message) {
      try {
        dropRejection(logger?.debug?.(message));
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
  const report = (err: unknown) => logger.warn(`the host's ${name} callback threw: ${thrownText(err)}`);
  return (...args: A) => {
    try {
      // An async callback (`onExit: async (info) => …`) rejects instead of throwing: reported the
      // same, not left an unhandled rejection, which ends a Node host by default.
      const returned: unknown = fn(...args);
      if (isThenable(returned)) returned.then(undefined, report);
    } catch (err) {
      report(err);
    }
  };
}

/** An async logger's rejection is dropped as its throw is. */
function dropRejection(returned: unknown): void {
  if (isThenable(returned)) returned.then(undefined, () => {});
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === "function";
}

/**
 * What was thrown, as text, and never a throw itself. String() throws on a null-prototype object,
 * and instanceof, String() and Object.prototype.toString all throw on a revoked Proxy; an Error's
 * `message` may be anything: raised while reporting, each escaped as the very uncaught exception
 * (or unhandled rejection) guarded() stops, or out of a call that stayed pending.
 */
export function thrownText(err: unknown): string {
  try {
    if (err instanceof Error && typeof err.message === "string") return err.message;
    return String(err instanceof Error ? err.message : err);
  } catch {}
  try {
    return Object.prototype.toString.call(err);
  } catch {
    return "a value with no text form";
  }
}
