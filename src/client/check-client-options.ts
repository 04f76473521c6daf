import type { LocalAiClientOptions } from "./client-options.ts";
import { LocalAiError } from "./errors.ts";

/**
 * The lowest value each numeric option takes; left out, `null` or NaN (Number() of an unset
 * setting) is its default, and Infinity is allowed: no limit for a call's time, the longest wait
 * a timer holds for the others.
 */
const AT_LEAST = {
  requestTimeoutMs: 0,
  streamTimeoutMs: 0,
  maxBufferedEvents: 0,
  maxBufferedBytes: 0,
  // 0 dropped every line from the core, its answer to initialize included.
  maxLineBytes: 1,
  stderrTailLines: 0,
  stopGraceMs: 0,
} as const;

const RESTART_AT_LEAST = {
  maxRestarts: 0,
  initialDelayMs: 0,
  maxDelayMs: 0,
  // 0 reset the count on every exit: a core crashing after its handshake restarted forever. So
  // did 1 ms, or any time its spawn and handshake alone outlast: a second is the least that
  // tells a run from a start. Restarting forever is `maxRestarts: Infinity`.
  resetAfterMs: 1000,
} as const;

/**
 * The first option the client cannot run with, as the `invalid_request` start() rejects with
 * (`data.field` names it), else undefined. A string ("30000" from a settings file) took the
 * default without a word, or was coerced by setTimeout; a negative time limit meant none, a
 * negative size dropped everything, a negative restart delay restarted at once.
 */
export function checkClientOptions(options: LocalAiClientOptions): LocalAiError | undefined {
  for (const [field, min] of Object.entries(AT_LEAST)) {
    const bad = outOfRange(field, options[field as keyof typeof AT_LEAST], min);
    if (bad) return bad;
  }
  const restart = options.restart as unknown;
  if (restart == null || typeof restart === "boolean") return undefined;
  if (typeof restart !== "object")
    return invalid("restart", `must be a boolean or an object, not a ${typeof restart}`);
  for (const [key, min] of Object.entries(RESTART_AT_LEAST)) {
    const bad = outOfRange(`restart.${key}`, (restart as Record<string, unknown>)[key], min);
    if (bad) return bad;
  }
  return undefined;
}

function outOfRange(field: string, value: unknown, min: number): LocalAiError | undefined {
  if (value == null || Number.isNaN(value)) return undefined;
  if (typeof value !== "number") return invalid(field, `must be a number, not a ${typeof value}`);
  if (value < min) return invalid(field, `must be at least ${min}, not ${value}`);
  return undefined;
}

function invalid(field: string, why: string): LocalAiError {
  return new LocalAiError("invalid_request", `the client option ${field} ${why}`, { field });
}
