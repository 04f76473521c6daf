import { cutText, wholeCharCut } from "./text-cut.ts";

/**
 * Text from outside (a GGUF's `general.name` or architecture, a file name, a device's name) as a
 * person's terminal is shown it: a file from anywhere on the hub must not set the window title,
 * clear the screen, write a link or forge a line of the report. Every control character, the line
 * breaks and C1 controls (U+009B opens a sequence as ESC [ does) included, and the bidirectional
 * controls that reorder what a reader sees (Unicode's Bidi_Control, U+061C included), are written
 * as `\u{…}` escapes; a tab stays.
 */
const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

export function terminalText(text: string): string {
  return text.replace(UNSAFE, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

/**
 * terminalText of `text`, cut to `max` characters with "…" (text-cut.ts) when longer: each
 * escape is 4 to 8 characters, so a bound counted before escaping let a line of bidi overrides
 * grow eightfold. Never cut inside an escape, which would be shown as a broken one.
 */
export function terminalTextCut(text: string, max: number): string {
  return escapedCut(terminalText(cutText(text, max)), max);
}

/**
 * Escaped text (terminalText's, llama-log-text.ts's) cut to `max` characters with "…" when
 * longer: never inside a surrogate pair, nor inside an escape, which would be shown as a broken one.
 */
export function escapedCut(escaped: string, max: number): string {
  if (escaped.length <= max) return escaped;
  let at = wholeCharCut(escaped, max);
  const open = escaped.lastIndexOf("\\u{", at - 1);
  if (open >= 0 && escaped.indexOf("}", open) >= at) at = open;
  return `${escaped.slice(0, at)}…`;
}

/** Whether `text` holds none of what terminalText escapes (the log's common case: nothing to do). */
export function isTerminalSafe(text: string): boolean {
  return !ANY.test(text);
}

/** UNSAFE without its global flag, whose `test` would keep a place between calls. */
const ANY = new RegExp(UNSAFE.source);

/** `value` with every string in it (object values, array entries) through `terminalText`. */
export function terminalSafe<T>(value: T): T {
  if (typeof value === "string") return terminalText(value) as T;
  if (Array.isArray(value)) return value.map(terminalSafe) as T;
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, terminalSafe(v)])) as T;
  return value;
}

/**
 * `text` with each control character (C0, DEL and C1) written as `?`: doctor's `--json` writes
 * what a check says as JSON, which keeps DEL and C1 raw (U+009B opens a sequence as ESC [ does);
 * a name from a folder or a record is shown so there.
 */
export function controlsMarked(text: string): string {
  return text.replace(CONTROLS, "?");
}

const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * `value` as JSON (`indent` spaces) for a terminal or a log viewer: JSON.stringify escapes C0
 * controls only, and wrote DEL, C1 (U+009B opens a sequence as ESC [ does), the line separators
 * and the bidi overrides raw. Each is written as a `\uXXXX` escape, so the text read back is
 * the same; such characters only ever stand inside a JSON string.
 */
export function terminalJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(
    JSON_UNSAFE,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

const JSON_UNSAFE = /[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;
