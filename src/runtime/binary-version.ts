import { statSync } from "node:fs";

/**
 * One version of a binary file: its path, size and modification time (undefined when it cannot
 * be read). What a llama-server build can do is remembered per version, so a build updated in
 * place is asked again.
 */
export function binaryVersion(path: string): string | undefined {
  try {
    const st = statSync(path);
    return `${path}\0${st.size}\0${st.mtimeMs}`;
  } catch {
    return undefined;
  }
}
