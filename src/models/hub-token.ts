import { FileTooLarge, NotRegularFile, readSmallFile } from "../config/read-file.ts";
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
  if (fromEnv) return fromEnv;
  const file = tokenFile(env, home);
  let text: string;
  try {
    // Never a blocking read: a FIFO here would stop the core (config/read-file.ts).
    text = readSmallFile(file, TOKEN_MAX_BYTES);
  } catch (err) {
    if (err instanceof NotRegularFile)
      throw new UnusableToken(`the token file ${file}`, `is not a regular file (${err.kind})`);
    if (err instanceof FileTooLarge)
      throw new UnusableToken(`the token file ${file}`, `is ${err.bytes} bytes: not a token`);
    return undefined;
  }
  return text.trim() || undefined;
}
