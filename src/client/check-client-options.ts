import type { LocalAiClientOptions } from "./client-options.ts";
import { LocalAiError } from "./errors.ts";

/**
 * The lowest value each numeric option takes; left out, `null` or NaN (Number() of an unset
 * setting) is its default, and Infinity is allowed (no limit for a call's time, the longest wait
 * a timer holds for the others) except for the sizes in FINITE.
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
  // did 1 ms: a core crashing on the first call it is sent serves longer than that. A second
  // is the least that tells a run from a crash. Restarting forever is `maxRestarts: Infinity`.
  resetAfterMs: 1000,
} as const;

/**
 * Memory held for the core's whole life, whatever the host does: Infinity kept every stderr line
 * it wrote, or read a line with no end (a foreign binary's) until the host ran out of memory.
 */
const FINITE = new Set(["maxLineBytes", "stderrTailLines"]);

/** Counts: a fraction (2.5 restarts) is a settings file's slip, not a count. */
const WHOLE = new Set(["maxBufferedEvents", "stderrTailLines", "restart.maxRestarts"]);

/** Options that are the host's functions, left out or `null` when it has none. */
const CALLBACKS = ["onStderr", "onExit", "onRestart", "onFailed", "spawn"] as const;

/**
 * The first option the client cannot run with, as the `invalid_request` start() rejects with
 * (`data.field` names it), else undefined. A string ("30000" from a settings file) took the
 * default without a word, or was coerced by setTimeout; a negative time limit meant none, a
 * negative size dropped everything, a negative restart delay restarted at once.
 */
export function checkClientOptions(options: LocalAiClientOptions): LocalAiError | undefined {
  if (options === null || typeof options !== "object")
    return invalid("options", `must be an object, not ${kind(options)}`);
  const wrong = wrongType(options);
  if (wrong) return wrong;
  for (const [field, min] of Object.entries(AT_LEAST)) {
    const bad = outOfRange(field, options[field as keyof typeof AT_LEAST], min);
    if (bad) return bad;
  }
  const restart = options.restart as unknown;
  if (restart == null || typeof restart === "boolean") return undefined;
  // An array is an object to typeof, and restart: [] ran with the default restarts.
  if (typeof restart !== "object" || Array.isArray(restart))
    return invalid("restart", `must be a boolean or an object, not ${kind(restart)}`);
  for (const [key, min] of Object.entries(RESTART_AT_LEAST)) {
    const bad = outOfRange(`restart.${key}`, (restart as Record<string, unknown>)[key], min);
    if (bad) return bad;
  }
  return undefined;
}

/**
 * The first option, other than the numbers, of the wrong type. A plain-JS host's slip surfaced
 * later and elsewhere: spawn's TypeError as a `core_exited`, a callback's on each call of it as a
 * logger warning, a number coerced into the core's environment. `null` is the default, as
 * `undefined` is, except for `binary`, which has none.
 */
function wrongType(o: LocalAiClientOptions): LocalAiError | undefined {
  // An empty config or cwd (a settings field left blank) is none, as it always was: no
  // --config, the default folder (core-launch.ts). Only the binary has no default to fall back on.
  const text =
    path("binary", o.binary) ??
    (o.config == null ? undefined : stringWithoutNul("config", o.config)) ??
    (o.cwd == null ? undefined : stringWithoutNul("cwd", o.cwd));
  if (text) return text;
  if (o.args != null) {
    if (!Array.isArray(o.args)) return invalid("args", `must be an array of strings, not ${kind(o.args)}`);
    for (const [i, arg] of o.args.entries()) {
      const bad = stringWithoutNul(`args[${i}]`, arg);
      if (bad) return bad;
    }
  }
  if (o.env != null) {
    // A Map's entries are not its keys: spawn read none of them, and the core ran with no environment.
    if (!isRecord(o.env) || o.env instanceof Map)
      return invalid("env", `must be an object of strings, not ${kind(o.env)}`);
    // `undefined` is an unset variable, as in process.env; Node coerced a number (or null) to text.
    for (const [name, value] of Object.entries(o.env)) {
      // Spawn throws on such a name (ERR_INVALID_ARG_VALUE), which came back as a core_exited.
      if (name.includes("\0"))
        return invalid("env", `must not have a variable name with a NUL character (${JSON.stringify(name)})`);
      const bad = value === undefined ? undefined : stringWithoutNul(`env.${name}`, value);
      if (bad) return bad;
    }
  }
  if (o.initialize != null && !isRecord(o.initialize))
    return invalid("initialize", `must be an object, not ${kind(o.initialize)}`);
  const logger = o.logger as unknown;
  if (logger != null) {
    if (!isRecord(logger)) return invalid("logger", `must be an object with warn(), not ${kind(logger)}`);
    if (typeof logger.warn !== "function")
      return invalid("logger.warn", `must be a function, not ${kind(logger.warn)}`);
    if (logger.debug != null && typeof logger.debug !== "function")
      return invalid("logger.debug", `must be a function, not ${kind(logger.debug)}`);
  }
  for (const field of CALLBACKS) {
    const fn = o[field] as unknown;
    if (fn != null && typeof fn !== "function") return invalid(field, `must be a function, not ${kind(fn)}`);
  }
  return undefined;
}

/** A path: spawn refuses an empty one, and Node any string with a NUL in it. */
function path(field: string, value: unknown): LocalAiError | undefined {
  if (value === "") return invalid(field, "must not be empty");
  return stringWithoutNul(field, value);
}

function stringWithoutNul(field: string, value: unknown): LocalAiError | undefined {
  if (typeof value !== "string") return invalid(field, `must be a string, not ${kind(value)}`);
  if (value.includes("\0")) return invalid(field, "must not contain a NUL character");
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** What a value is, for a message: "a string", "an array", "null". */
function kind(value: unknown): string {
  if (value == null) return String(value);
  if (Array.isArray(value)) return "an array";
  if (value instanceof Map) return "a Map";
  const type = typeof value;
  return type === "object" ? "an object" : `a ${type}`;
}

function outOfRange(field: string, value: unknown, min: number): LocalAiError | undefined {
  if (value == null || Number.isNaN(value)) return undefined;
  if (typeof value !== "number") return invalid(field, `must be a number, not ${kind(value)}`);
  if (value < min) return invalid(field, `must be at least ${min}, not ${value}`);
  if (FINITE.has(field) && !Number.isFinite(value))
    return invalid(field, `must be a finite number, not ${value}`);
  // Infinity is no limit (a count never spent), not a fraction.
  if (WHOLE.has(field) && Number.isFinite(value) && !Number.isInteger(value))
    return invalid(field, `must be a whole number, not ${value}`);
  return undefined;
}

function invalid(field: string, why: string): LocalAiError {
  return new LocalAiError("invalid_request", `the client option ${field} ${why}`, { field });
}
