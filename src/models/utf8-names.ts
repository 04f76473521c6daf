import { readdirSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { nextTurn } from "../util/next-turn.ts";

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

/**
 * Names decoded between two turns of the loop (`folderNamesAsync`): a models folder of 10,000
 * files decoded in one stretch held `ping` and `cancel` with the listing's other work.
 */
const NAMES_PER_TURN = 256;

/** folderNames off the loop (models/list-candidates.ts), decoded a slice a turn; rejects as readdir does. */
export async function folderNamesAsync(folder: string): Promise<FolderNames> {
  const raws = await readdir(folder, { encoding: "buffer" });
  const out: FolderNames = { names: [], undecodable: new Set() };
  for (let at = 0; at < raws.length; at += NAMES_PER_TURN) {
    if (at > 0) await nextTurn();
    decodeInto(raws.slice(at, at + NAMES_PER_TURN), out);
  }
  return out;
}

function decoded(raws: readonly Buffer[]): FolderNames {
  const out: FolderNames = { names: [], undecodable: new Set() };
  decodeInto(raws, out);
  return out;
}

function decodeInto(raws: readonly Buffer[], out: FolderNames): void {
  for (const raw of raws) {
    try {
      out.names.push(strictUtf8.decode(raw));
    } catch {
      const shown = raw.toString("utf8");
      out.names.push(shown);
      out.undecodable.add(shown);
    }
  }
}
