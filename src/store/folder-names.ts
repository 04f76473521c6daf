import type { Dirent } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

/**
 * A `memory.folders` file's name as the index keeps it (docs/agent.md, "Memory"). A name on
 * Linux is bytes, not always UTF-8; the index keys a file by its path as text (`memory_files.path`,
 * `memory.source`, a citation's `id`), so each byte that is not part of a UTF-8 character is
 * written as U+FFFD and its two hex digits (`caf\xe9.md` is `caf�e9.md`), and so is each byte of
 * a U+FFFD in the name that two such digits follow: the key is the name itself for every other
 * name, and no two names have one key. A file is reached through its key's bytes (`onDisk`):
 * Bun reads a name that is not UTF-8 as text with U+FFFD in place of its bytes, a path no file has.
 */

const MARK = "\uFFFD";
const ESCAPE = /\uFFFD([0-9a-f]{2})/y;
const isHex = (b: number | undefined) =>
  b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66));
const escaped = (b: number) => MARK + b.toString(16).padStart(2, "0");

/** The key of a name's bytes. */
export function keyOf(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const n = utf8Length(bytes, i);
    if (n === 0) {
      out += escaped(bytes[i] as number);
      i++;
      continue;
    }
    const char = Buffer.from(bytes.buffer, bytes.byteOffset + i, n).toString("utf8");
    out +=
      char === MARK && isHex(bytes[i + n]) && isHex(bytes[i + n + 1])
        ? [0xef, 0xbf, 0xbd].map(escaped).join("")
        : char;
    i += n;
  }
  return out;
}

/** A key's bytes (the name it was made from). */
export function bytesOf(key: string): Buffer {
  const parts: Buffer[] = [];
  let plain = 0;
  for (let i = key.indexOf(MARK); i !== -1; i = key.indexOf(MARK, i + 1)) {
    ESCAPE.lastIndex = i;
    const m = ESCAPE.exec(key);
    if (!m) continue;
    parts.push(Buffer.from(key.slice(plain, i)), Buffer.from([Number.parseInt(m[1] as string, 16)]));
    plain = i + 3;
  }
  parts.push(Buffer.from(key.slice(plain)));
  return Buffer.concat(parts);
}

/** What a key reads as, for a person (a citation's `name`): each byte that is not UTF-8 as U+FFFD. */
export function readable(key: string): string {
  return key.includes(MARK) ? bytesOf(key).toString("utf8") : key;
}

/**
 * The path to hand the file system for a walk's `path` under `root`: the path itself unless its
 * part below the folder holds an escape (the folder's own name, from the config, is text).
 */
export function onDisk(root: string, path: string): string | Buffer {
  const below = path.startsWith(root) ? path.slice(root.length) : "";
  if (!below.includes(MARK)) return path;
  return Buffer.concat([Buffer.from(root), bytesOf(below)]);
}

/** A directory's entry as the walk sees it: its key and its kind (links are not followed). */
export interface Entry {
  name: string;
  isDirectory: boolean;
  isFile: boolean;
}

/**
 * The entries of the walk's directory `dir` under `root`. A listing with a U+FFFD in a name is
 * read again as bytes, so a name that is not UTF-8 is keyed by its own bytes and its kind asked
 * of the file system by them (Bun gives no kinds with byte names).
 */
export async function entriesOf(root: string, dir: string): Promise<Entry[]> {
  const at = onDisk(root, dir);
  const listed = await readdir(at, { withFileTypes: true });
  const entry = (e: Dirent): Entry => ({ name: e.name, isDirectory: e.isDirectory(), isFile: e.isFile() });
  if (!listed.some((e) => e.name.includes(MARK))) return listed.map(entry);
  const byName = new Map(listed.map((e) => [e.name, e]));
  const names = await readdir(at, { encoding: "buffer" });
  return Promise.all(
    names.map(async (bytes): Promise<Entry> => {
      const name = keyOf(bytes);
      const e = byName.get(name);
      if (e && !name.includes(MARK)) return entry(e);
      const st = await lstat(onDisk(root, join(dir, name))).catch(() => undefined);
      return { name, isDirectory: st?.isDirectory() ?? false, isFile: st?.isFile() ?? false };
    }),
  );
}

/** How many bytes the UTF-8 character at `i` has (its lead byte and the bytes that may follow it), 0 if none starts there. */
function utf8Length(b: Uint8Array, i: number): number {
  const lead = b[i] as number;
  if (lead < 0x80) return 1;
  const [n, low, high] = FOLLOWERS.find(([, , , from, to]) => lead >= from && lead <= to) ?? [0, 0, 0];
  if (n === 0 || i + n > b.length) return 0;
  const second = b[i + 1] as number;
  if (second < low || second > high) return 0;
  for (let k = 2; k < n; k++) {
    const c = b[i + k] as number;
    if (c < 0x80 || c > 0xbf) return 0;
  }
  return n;
}

/** [length, the second byte's range, the lead bytes' range]: Unicode's well-formed UTF-8 (table 3-7). */
const FOLLOWERS: readonly (readonly [number, number, number, number, number])[] = [
  [2, 0x80, 0xbf, 0xc2, 0xdf],
  [3, 0xa0, 0xbf, 0xe0, 0xe0],
  [3, 0x80, 0xbf, 0xe1, 0xec],
  [3, 0x80, 0x9f, 0xed, 0xed],
  [3, 0x80, 0xbf, 0xee, 0xef],
  [4, 0x90, 0xbf, 0xf0, 0xf0],
  [4, 0x80, 0xbf, 0xf1, 0xf3],
  [4, 0x80, 0x8f, 0xf4, 0xf4],
];
