import { isTerminalSafe, terminalText } from "./terminal-text.ts";

/**
 * A log message as it may be written: text from outside (a file name, a session id, an error
 * from a child) must not forge a log entry of its own or drive a terminal. So a line break starts
 * an indented continuation (an entry begins at the line's start: a stack trace stays readable,
 * a forged `[error] …` line does not look like one), and the other control characters, ESC
 * included, and the bidirectional overrides that reorder what a reader sees are written as
 * `\u{…}` escapes.
 */
export function logLine(message: string): string {
  if (isTerminalSafe(message)) return message;
  // Split at the breaks first: what terminalText escapes in each line is then the rest.
  return message
    .split(/\r\n|[\r\n\u2028\u2029]/)
    .map(terminalText)
    .join("\n    ");
}
