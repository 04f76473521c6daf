import { literalReplacer } from "./escape-regexp.ts";

/** A flag or variable name that says its value is a credential: `--api-key`, `TOKEN`, `--password`. */
export const SECRET_NAME = /key|token|secret|passw(or)?d|pwd|auth|bearer|credential|cookie/i;
/** How a flag (`--api-key`, `-k`) or a variable (`API_KEY`) is spelt. */
const NAME = /^-{0,2}[A-Za-z_][\w.-]*$/;

/** The credentials a URL carries: its user:password and the values of its secret-named query keys. */
function urlSecrets(text: string): string[] {
  if (!URL.canParse(text)) return [];
  const url = new URL(text);
  const found = [url.password, decoded(url.password), url.username, decoded(url.username)];
  for (const [name, value] of url.searchParams) if (SECRET_NAME.test(name)) found.push(value);
  return found;
}

/**
 * A URL part as it is written unescaped; as it stands where it is no escape: a bare `%` (a
 * password of `50%off`, not encoded, as people write them) made decodeURIComponent throw, and
 * with it the server's start, after its spawn: every chat failed and left the child running.
 */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** A header's name (RFC 9110's token, kept to what names use). */
const HEADER_NAME = /^[A-Za-z][\w-]*$/;

/**
 * A header's credential, where an argument is a header (`Authorization: Bearer …`, `X-Api-Key:…`,
 * as mcp-remote's `--header` takes them) whose name says it holds one: the value, and a scheme's
 * credentials alone (`Bearer`, `Basic`…), which an echo may show without the scheme.
 */
function headerSecrets(text: string): string[] {
  const colon = text.indexOf(":");
  if (colon <= 0 || !HEADER_NAME.test(text.slice(0, colon)) || !SECRET_NAME.test(text.slice(0, colon)))
    return [];
  const value = text.slice(colon + 1).trim();
  const credentials = /^[A-Za-z]+\s+(\S+)$/.exec(value)?.[1];
  return credentials === undefined ? [value] : [value, credentials];
}
/**
 * The values in an MCP server's `args` that are credentials (docs/agent.md "MCP servers"): the
 * value of a secret-named flag (`--api-key sk-…`, `--token=…`), of a `NAME=value` pair (`env
 * API_KEY=…`), a secret-named header's value (`Authorization: Bearer …`), and a URL's
 * user:password and secret-named query values. An argument parser's
 * error or a traceback echoes its argv, and the failed start's message quotes that to the host.
 */
export function argSecrets(args: readonly string[]): string[] {
  const found: string[] = [];
  args.forEach((arg, i) => {
    const eq = arg.indexOf("=");
    const at = flagValueAt(args, i);
    if (at) found.push((args[at.index] ?? "").slice(at.from));
    found.push(...urlSecrets(arg), ...headerSecrets(arg));
    if (eq > 0) found.push(...urlSecrets(arg.slice(eq + 1)), ...headerSecrets(arg.slice(eq + 1)));
  });
  return found;
}

/**
 * Where the value of a secret-named flag or variable at `args[i]` stands: after its `=` in the
 * same argument (`--token=…`, `API_KEY=…`), or the whole next one (`--api-key sk-…`).
 */
function flagValueAt(args: readonly string[], i: number): { index: number; from: number } | undefined {
  const arg = args[i] ?? "";
  const eq = arg.indexOf("=");
  // Only a flag's or a variable's name: a URL's `?access_token=` is the URL's own (urlSecrets).
  const name = eq > 0 ? arg.slice(0, eq) : arg;
  if (!NAME.test(name) || !SECRET_NAME.test(name)) return undefined;
  if (eq > 0) return { index: i, from: eq + 1 };
  if (arg.startsWith("-") && !(args[i + 1] ?? "-").startsWith("-")) return { index: i + 1, from: 0 };
  return undefined;
}

/**
 * Each secret as it is written and as a URL carries it, once each, the longest first: a client library's error quotes the URL
 * it requested (`401 … for url: …?api_key=AbCd%2FeF%2Bg%3D`), and a key with `/`, `+` or `=` (an
 * AWS-style secret, base64) matched there in no raw form. Lowercase escapes too (some encoders'),
 * and a URL query's value, which argSecrets gives decoded, is found as the argument wrote it.
 */
export function secretSpellings(secrets: readonly string[]): string[] {
  const all = secrets.flatMap((s) => {
    const encoded = encodeURIComponent(s);
    const spelt =
      encoded === s ? [s] : [s, encoded, encoded.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase())];
    return [...spelt, ...base64Runs(s)];
  });
  // Once each, the longest first: one that holds another is taken whole.
  return [...new Set(all)].sort((a, b) => b.length - a.length);
}

/**
 * The base64 a secret's bytes make wherever it is encoded among others (a Basic header's
 * `user:key`, which an error dumping its request shows: axios's does): base64 encodes 3 bytes to
 * 4 characters, so for each of the 3 offsets the key may begin at, the groups of its bytes alone
 * are always the same run. Runs under 8 characters are not looked for (they could be anything's).
 * A character or two either side, a byte or two of the key, stay shown.
 */
function base64Runs(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const runs: string[] = [];
  for (let skip = 0; skip < 3; skip++) {
    const whole = bytes.subarray(skip, skip + Math.floor((bytes.length - skip) / 3) * 3);
    if (whole.length >= 6) runs.push(whole.toString("base64"));
  }
  return runs;
}

/** Shorter values are not looked for everywhere: "1", "30", "true" are in any text and are no secrets. */
export const SECRET_MIN_CHARS = 6;
const REDACTED = "[redacted]";

/** A URL's user information (`user:password@`, a token as the user: `https://TOKEN@host`). */
const URL_USERINFO = /(\b[a-z][\w+.-]*:\/\/)[^\s/@]+@/gi;
/** A secret-named query value (`?access_token=…`, `&api_key=…`). */
const QUERY_SECRET =
  /([?&;][^=&#\s]*?(?:key|token|secret|passw(?:or)?d|pwd|auth|bearer|credential|cookie)[^=&#\s]*=)[^&#\s]+/gi;

/**
 * `text`, a command line (its arguments joined by spaces), with each credential of the argument
 * lists (`argSecrets`) shown as `[redacted]`. Hidden where they stand, whatever their length: a
 * secret-named flag's value (`--auth-timeout 30`), a URL's user information and its secret-named
 * query values (`https://u:pw12@host`). Elsewhere only secrets of SECRET_MIN_CHARS or more are
 * looked for, or every "30" would go; in one pass, the longest first (one that holds another is
 * taken whole), and never inside a `[redacted]` already there.
 */
export function withoutArgSecrets(text: string, ...argLists: (readonly string[])[]): string {
  const secrets = secretSpellings(argLists.flatMap((args) => argSecrets(args))).filter(
    (s) => s.length >= SECRET_MIN_CHARS,
  );
  const hide = literalReplacer(secrets, REDACTED);
  const words = text.split(" ");
  const shown = words.map((w) =>
    w.replace(URL_USERINFO, `$1${REDACTED}@`).replace(QUERY_SECRET, `$1${REDACTED}`),
  );
  words.forEach((_, i) => {
    const at = flagValueAt(words, i);
    if (at) shown[at.index] = (words[at.index] ?? "").slice(0, at.from) + REDACTED;
  });
  return shown.join(" ").split(REDACTED).map(hide).join(REDACTED);
}
