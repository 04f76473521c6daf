import type { ConsolaInstance } from "consola";
import { logLine } from "./log-line.ts";

/**
 * The process-wide logger: consola writing to stderr only (in serve-stdio mode stdout carries
 * protocol lines and nothing else); once stderr is broken it logs nothing. consola itself loads on the first message that passes the
 * level, so a quiet start-up does not pay for it.
 */
export type LogLevelName = "silent" | "fatal" | "error" | "warn" | "info" | "debug" | "trace";

// consola's numeric levels.
const LEVELS: Record<LogLevelName, number> = {
  silent: Number.NEGATIVE_INFINITY,
  fatal: 0,
  error: 0,
  warn: 1,
  info: 3,
  debug: 4,
  trace: 5,
};

function levelOf(name: string | undefined): number | undefined {
  if (!name) return undefined;
  const key = name.toLowerCase();
  return Object.hasOwn(LEVELS, key) ? LEVELS[key as LogLevelName] : undefined;
}

let level = levelOf(process.env.LOCAL_AI_LOG_LEVEL) ?? LEVELS.info;
let instance: ConsolaInstance | undefined;
/** stderr failed (the host closed its end): nothing is logged from then on. */
let stderrBroken = false;

function consola(): ConsolaInstance {
  if (!instance) {
    // Badges and glyphs (✖ ℹ ⚠) are for a person at a terminal; a pipe or a log file gets
    // plain `[level] message` lines (consola/basic is consola with its basic reporter only).
    const { createConsola } = process.stderr.isTTY
      ? (require("consola") as typeof import("consola"))
      : (require("consola/basic") as typeof import("consola/basic"));
    const stream = guardedStderr();
    instance = createConsola({
      level,
      stdout: stream,
      stderr: stream,
      formatOptions: { date: true, colors: false, compact: true },
    });
  }
  return instance;
}

/**
 * stderr as consola's stream, made safe to lose: a host that closes its end of the pipe must not
 * stop the core, as a broken stdout does not (docs/protocol.md#output-buffering-the-writer). A
 * failed write (EPIPE, thrown or reported later as an 'error' event, which unheard would end the
 * process) silences the logger for good; there is nowhere else to say so, since stdout carries
 * protocol lines only.
 */
function guardedStderr(): NodeJS.WriteStream {
  const stderr = process.stderr;
  const broken = () => {
    stderrBroken = true;
  };
  stderr.on("error", broken);
  const stream = {
    write(data: string): boolean {
      if (stderrBroken) return true;
      try {
        return stderr.write(data, (err) => {
          if (err) broken();
        });
      } catch {
        broken();
        return true;
      }
    },
    // consola reads the width to lay out its lines.
    get columns() {
      return stderr.columns;
    },
  };
  return stream as unknown as NodeJS.WriteStream;
}

function at(name: Exclude<LogLevelName, "silent">) {
  return (message: string, ...args: unknown[]): void => {
    if (LEVELS[name] > level || stderrBroken) return;
    consola()[name](logLine(message), ...args);
  };
}

export const logger = {
  fatal: at("fatal"),
  error: at("error"),
  warn: at("warn"),
  info: at("info"),
  debug: at("debug"),
  trace: at("trace"),
};

/**
 * What is wrong with LOCAL_AI_LOG_LEVEL, when it names no level (`verbose`, `warning`): the
 * config's level, else info, applies instead, which left unsaid reads as the variable obeyed.
 */
export function envLevelProblem(value = process.env.LOCAL_AI_LOG_LEVEL): string | undefined {
  if (!value || levelOf(value) !== undefined) return undefined;
  return `LOCAL_AI_LOG_LEVEL '${value}' is not a log level (${Object.keys(LEVELS).join(", ")}); it is ignored`;
}

/** Applies the config's level unless LOCAL_AI_LOG_LEVEL already decided it (env wins). */
export function setLogLevel(configLevel: string | undefined): void {
  const next = levelOf(process.env.LOCAL_AI_LOG_LEVEL) ?? levelOf(configLevel);
  if (next === undefined) return;
  level = next;
  if (instance) instance.level = next;
}

/**
 * Logs an unexpected error with its stack, to stderr only. Never throws: it is what the
 * dispatcher's catch and the core's fault listener call, and String() throws on a value with no
 * string form (a null-prototype object, `{"toString":1}`), which left a request unanswered or,
 * from the uncaughtException listener, ended the core at once with its children running.
 */
export function logUnexpected(tag: string, err: unknown): void {
  logger.error(`${tag}: ${describeThrown(err)}`);
}

/** What was thrown, as text, whatever it is. */
export function describeThrown(err: unknown): string {
  try {
    const detail = err instanceof Error ? (err.stack ?? err.message) : err;
    return typeof detail === "string" ? detail : String(detail);
  } catch {
    return Object.prototype.toString.call(err);
  }
}
