import { readdirSync } from "node:fs";
import { join } from "node:path";
import { readSmallFile } from "../../util/read-file.ts";
import { type KvEntry, SidecarSchema } from "./kv-entry.ts";
import { OWN_FILE } from "./kv-use.ts";

// Reads of the KV state folder (kv-disk.ts): its listing, its sidecars, its states without one.

/** A sidecar is a few KiB (its prompt record's notes); one past this is not one of ours. */
const SIDECAR_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Sidecars an erase reads per turn of the loop (each up to 16 MiB): read all at once, a KV folder
 * of thousands (or files planted in a shared data_dir) held ping and cancel for the whole erase
 * (docs/agent.md#prompt-reuse). Lowered in tests.
 */
export const ERASE_PASS = { max: 64 };

export type Described = { name: string; entry: KvEntry }[];

/**
 * The readable sidecars of `names`, read `ERASE_PASS.max` a turn of the loop, given to `done`:
 * at once (undefined returned) when they fit one pass, else later (a promise of `done`'s end,
 * `done` told the loop turned meanwhile).
 */
export function readInPasses(
  names: readonly string[],
  read: (name: string) => KvEntry | undefined,
  done: (described: Described, turned: boolean) => Promise<void>,
): Promise<void> | undefined {
  const described: Described = [];
  let next = 0;
  const pass = () => {
    const end = Math.min(names.length, next + ERASE_PASS.max);
    for (; next < end; next++) {
      const name = names[next] as string;
      const entry = read(name);
      if (entry) described.push({ name, entry });
    }
    return next >= names.length;
  };
  if (pass()) {
    void done(described, false);
    return undefined;
  }
  return new Promise<void>((resolve, reject) => {
    const go = () => {
      try {
        if (!pass()) setImmediate(go);
        else done(described, true).then(resolve, reject);
      } catch (err) {
        reject(err);
      }
    };
    setImmediate(go);
  });
}

/** The sidecar at `path`, if one of the current shape can be read there. */
export function readSidecar(path: string): KvEntry | undefined {
  try {
    // Regular files only, never a blocking open: a FIFO here would hold the core.
    const parsed = SidecarSchema.safeParse(JSON.parse(readSmallFile(path, SIDECAR_MAX_BYTES)));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The folder's names; none when it cannot be listed (not there, not a folder). */
export function listFolder(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** The sessions whose sidecar `listing` names (our names only). */
export function sidecarNames(listing: readonly string[]): string[] {
  return listing.flatMap((f) => {
    const m = OWN_FILE.exec(f);
    return m?.[2] === "json" ? [m[1] as string] : [];
  });
}

/** Names of our state files in `listing` with no readable sidecar (`described`: the readable ones). */
export function orphansOf(described: { name: string }[], listing: string[]): string[] {
  const known = new Set(described.map((e) => e.name));
  return listing.flatMap((f) => {
    const m = OWN_FILE.exec(f);
    return m?.[2] === "bin" && !known.has(m[1] as string) ? [m[1] as string] : [];
  });
}

/**
 * The folder listed again after an erase's turns (`readInPasses`): a session's first save renamed
 * into place meanwhile (another core's, its look at the store made before the rows went) was never
 * listed, its sidecar never read, its notes' text left past the delete. Only the new sidecars are
 * read (into `described`); the listing returned has the temps made meanwhile too.
 */
export function listedSince(dir: string, listing: string[], described: Described): string[] {
  const before = new Set(listing);
  const now = listFolder(dir);
  for (const f of now) {
    const m = before.has(f) ? null : OWN_FILE.exec(f);
    const entry = m?.[2] === "json" ? readSidecar(join(dir, f)) : undefined;
    if (m && entry) described.push({ name: m[1] as string, entry });
  }
  return [...new Set([...listing, ...now])];
}
