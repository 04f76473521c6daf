/**
 * The messages of llama-server's that quote a request or a reply (runtime/log-redact.ts says
 * which and why), here on the lowest floor so every caller that logs one of its errors can take
 * the quote out: the supervisor, a turn, the memory embedder (docs/protocol.md: logs at info and
 * above never quote a conversation).
 */

export const NOT_LOGGED = "[model output not logged]";

/** A reply that did not parse, written out whole. */
export const UNPARSED = /^(.*?\bunparsed \S+ output: ).*$/s;

/**
 * nlohmann's parse errors in a part of a line cut for length (log-sink.ts `readLines`) or a message
 * cut so: a long quote runs on into what comes after, and a quote inside it is no end: all of it goes.
 */
export const LAST_READ_CUT = /(last read: )'.*$/s;

/**
 * One message of llama-server's (a request's error, as the supervisor logs why it restarts it)
 * without the text it quotes: the same messages as `LogRedactor.line`, on text that is not a log
 * line (a 500's body quoting what its parser last read of the request).
 */
export function withoutQuotes(message: string): string {
  const unparsed = UNPARSED.exec(message);
  if (unparsed) return `${unparsed[1]}${NOT_LOGGED}`;
  // All after it: the message reaching here was cut at 1000 characters (llama/errors.ts), often
  // inside a long quote, whose own quotes are then no end; only nlohmann's `; expected …` is lost.
  return message.replace(LAST_READ_CUT, `$1${NOT_LOGGED}`);
}
