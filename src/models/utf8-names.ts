import { readdirSync } from "node:fs";
import { readdir } from "node:fs/promises";

// ignoreBOM: a name that begins with U+FEFF keeps it (by default the decoder drops it, naming no file).
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A folder's entry names, and which of them are not UTF-8 (each as shown, U+FFFD for its bytes). */
export interface FolderNames {
  names: string[];
  undecodable: Set<string>;
}

/**
 * A folder's entries read as bytes. Read as strings, a name that is not UTF-8 (a Latin-1 `café`
 * from an old archive or another system's copy) comes back with U+FFFD for its bytes: a path no
 * open finds, so `models` said "absent" of a file that is there. No config (YAML) or request
 * (JSON) can name such a file either, so it is shown as it decodes and told apart. Throws as
 * readdirSync does.
 */
export function folderNames(folder: string): FolderNames {
  return decoded(readdirSync(folder, { encoding: "buffer" }));
}

/** folderNames off the loop (models/list-candidates.ts); rejects as readdir does. */
export async function folderNamesAsync(folder: string): Promise<FolderNames> {
  return decoded(await readdir(folder, { encoding: "buffer" }));
}

function decoded(raws: readonly Buffer[]): FolderNames {
  const out: FolderNames = { names: [], undecodable: new Set() };
  for (const raw of raws) {
    try {
      out.names.push(strictUtf8.decode(raw));
    } catch {
      const shown = raw.toString("utf8");
      out.names.push(shown);
      out.undecodable.add(shown);
    }
  }
  return out;
}
