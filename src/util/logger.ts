import { createConsola, type ConsolaInstance, LogLevels } from "consola";

/**
 * The process-wide logger. Both of consola's streams point at stderr: in serve-stdio mode
 * stdout carries protocol lines and nothing else.
 */
export type LogLevelName = "silent" | "fatal" | "error" | "warn" | "info" | "debug" | "trace";

export const LOG_LEVEL_NAMES: readonly LogLevelName[] = [
  "silent",
  "fatal",
  "error",
  "warn",
  "info",
  "debug",
  "trace",
];

function levelOf(name: string | undefined): number | undefined {
  if (!name) return undefined;
  const key = name.toLowerCase() as LogLevelName;
  return key in LogLevels ? LogLevels[key] : undefined;
}

export const logger: ConsolaInstance = createConsola({
  level: levelOf(process.env.LOCAL_AI_LOG_LEVEL) ?? LogLevels.info,
  stdout: process.stderr,
  stderr: process.stderr,
  formatOptions: { date: true, colors: false, compact: true },
});

/** Applies the config's level unless LOCAL_AI_LOG_LEVEL already decided it (env wins). */
export function setLogLevel(configLevel: string | undefined): void {
  const level = levelOf(process.env.LOCAL_AI_LOG_LEVEL) ?? levelOf(configLevel);
  if (level !== undefined) logger.level = level;
}

/** Logs an unexpected error with its stack, to stderr only. */
export function logUnexpected(tag: string, err: unknown): void {
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  logger.error(`${tag}: ${detail}`);
}
