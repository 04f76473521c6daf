import { secretSpellings } from "../util/arg-secrets.ts";
import { escapeRegExp } from "../util/escape-regexp.ts";
import { FileTooLarge, NotRegularFile, readSmallFile } from "../util/read-file.ts";
import { type Env, tokenFile } from "./hf-cache.ts";

/**
 * The hub token: `$HF_TOKEN`, else the token file `huggingface-cli login` writes. It is passed
 * to the hub clients and nowhere else: never logged, never put in a message or on a command line.
 */

/** A token that cannot be sent: where it came from and what is wrong, never the token itself. */
export class UnusableToken extends Error {
  constructor(
    /** `HF_TOKEN`, or `the token file <path>`. */
    readonly source: string,
    why: string,
  ) {
    super(`${source} ${why}`);
    this.name = "UnusableToken";
  }
}

/** A token is a few dozen characters; a file much larger than this is not one. */
const TOKEN_MAX_BYTES = 64 * 1024;

/** The token, or undefined when there is none; UnusableToken when the one there cannot be sent. */
export function readToken(env: Env, home: string): string | undefined {
  const fromEnv = env.HF_TOKEN?.trim();
  if (fromEnv) return checked(fromEnv, "HF_TOKEN");
  const file = tokenFile(env, home);
  let text: string;
  try {
    // Never a blocking read: a FIFO here would stop the core (util/read-file.ts).
    text = readSmallFile(file, TOKEN_MAX_BYTES);
  } catch (err) {
    if (err instanceof NotRegularFile)
      throw new UnusableToken(`the token file ${file}`, `is not a regular file (${err.kind})`);
    if (err instanceof FileTooLarge)
      throw new UnusableToken(`the token file ${file}`, `is ${err.bytes} bytes: not a token`);
    return undefined;
  }
  const token = text.trim();
  return token ? checked(token, `the token file ${file}`) : undefined;
}

/**
 * A token goes in a header (`Authorization: Bearer …`), where a control character is refused
 * by the request itself, which then reads as an unreachable hub, its message at risk of
 * quoting the header. So it is checked here, once: printable ASCII only, as the hub's tokens
 * are. What is wrong is said; the token never is.
 */
function checked(token: string, source: string): string {
  const why = /[\u0000-\u001f\u007f]/.test(token)
    ? "a control character"
    : /\s/.test(token)
      ? "a space"
      : /[^\u0021-\u007e]/.test(token)
        ? "a character that is not ASCII"
        : null;
  if (why === null) return token;
  throw new UnusableToken(
    source,
    `holds ${why} (a token is printable ASCII, such as hf_…); correct it or unset it`,
  );
}

/**
 * The hub's (or a proxy's) own words with the token taken out: a mirror at HF_ENDPOINT that
 * refuses a token may quote it back (`invalid token hf_…`), and its message goes into the pull's
 * error, to the host, its log and the issues people paste it into. Before any cut, so no part
 * of it is left.
 */
export function withoutToken(text: string, token: string | null | undefined): string {
  if (!token) return text;
  return text.replace(new RegExp(secretSpellings([token]).map(escapeRegExp).join("|"), "g"), "[redacted]");
}
