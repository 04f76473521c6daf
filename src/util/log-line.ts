/**
 * A log message as it may be written: text from outside (a file name, a session id, an error
 * from a child) must not forge a log entry of its own or drive a terminal. So a line break starts
 * an indented continuation (an entry begins at the line's start: a stack trace stays readable,
 * a forged `[error] …` line does not look like one), and the other control characters, ESC
 * included, and the bidirectional overrides that reorder what a reader sees are written as
 * `\u{…}` escapes.
 */
export function logLine(message: string): string {
  if (!UNSAFE.test(message)) return message;
  return message
    .replace(/\r\n|[\r\n\u2028\u2029]/g, "\n    ")
    .replace(CONTROL, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200e\u200f\u2028-\u202e\u2066-\u2069]/;
/** Every one of UNSAFE but the line breaks, which are made continuations first. */
const CONTROL =
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
