import { readFileSync } from "node:fs";
import { type Env, tokenFile } from "./hf-cache.ts";

/**
 * The hub token: `$HF_TOKEN`, else the token file `huggingface-cli login` writes. It is passed
 * to the hub client and nowhere else: never logged, never put in a message or on a command line.
 */
export function readToken(env: Env, home: string): string | undefined {
  const fromEnv = env.HF_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  try {
    return readFileSync(tokenFile(env, home), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
