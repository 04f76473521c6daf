import { isCollection, isMap, isPair, isScalar, isSeq, type Pair, type YAMLMap } from "yaml";

/**
 * Keys of a parsed config found in one pass per mapping. The yaml library compares each key
 * with every key before it (its `uniqueKeys`) and looks a key up by walking its mapping
 * (`getIn`): both square in the keys of one mapping, so a config of 60,000 keys (600 KB, under
 * the size cap) held the core for about a minute before it could answer a ping.
 */

/** A node as these walks read it. */
interface Ranged {
  range?: [number, number, number] | null;
}

/**
 * The offset of the first key that repeats one before it in the same mapping, or null: the
 * library's `uniqueKeys` rule (scalars by value, other keys by identity), with a set.
 */
export function duplicateKeyOffset(contents: unknown): number | null {
  const stack: unknown[] = [contents];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (isPair(node)) {
      stack.push(node.value, node.key);
      continue;
    }
    if (!isCollection(node)) continue;
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? pair.key.value : pair.key;
        // The library's === never finds NaN equal to itself; a set would.
        if (seen.has(key) && !Number.isNaN(key)) return (pair.key as Ranged | null)?.range?.[0] ?? 0;
        seen.add(key);
      }
    }
    for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i]);
  }
  return null;
}

/** Looks nodes up by path as `doc.getIn(path, true)` does, each mapping indexed once. */
export class KeyIndex {
  private readonly maps = new WeakMap<YAMLMap, Map<unknown, Pair>>();

  /** The pair of `map` whose key is `key` (a scalar key by its value). */
  pair(map: YAMLMap, key: unknown): Pair | undefined {
    let index = this.maps.get(map);
    if (!index) {
      index = new Map();
      for (const p of map.items) {
        const k = isScalar(p.key) ? p.key.value : p.key;
        if (!index.has(k)) index.set(k, p);
      }
      this.maps.set(map, index);
    }
    return index.get(key);
  }

  /** The node at `path` under `root`, or undefined: a list's item by its index, digits or number. */
  nodeAt(root: unknown, path: readonly (string | number)[]): unknown {
    let node = root;
    for (const key of path) {
      if (isMap(node)) node = this.pair(node, key)?.value;
      else if (isSeq(node)) {
        const i = typeof key === "string" && key !== "" ? Number(key) : key;
        node = typeof i === "number" && Number.isInteger(i) && i >= 0 ? node.items[i] : undefined;
      } else return undefined;
    }
    return node;
  }
}

/** Where a node's text ends (its value's, before any comment); -1 for none. */
const endOf = (node: unknown): number => (node as Ranged | null)?.range?.[1] ?? -1;

/**
 * The key path (a list's index as digits) down to the node the text at `offset` belongs to: at
 * each level the first key or item whose text ends at or after it. For a warning the library
 * gives by position alone (an unknown tag, which precedes its node).
 */
export function pathAt(contents: unknown, offset: number): string[] {
  const path: string[] = [];
  let node = contents;
  for (;;) {
    // A tag before a list or mapping (`!!str [5]`) is the collection's own: none of its items.
    if (isCollection(node) && ((node as Ranged).range?.[0] ?? 0) > offset) return path;
    if (isMap(node)) {
      const pair = node.items.find((p) => Math.max(endOf(p.key), endOf(p.value)) >= offset);
      if (!pair) return path;
      path.push(isScalar(pair.key) ? String(pair.key.value) : "?");
      if (endOf(pair.key) >= offset) return path;
      node = pair.value;
    } else if (isSeq(node)) {
      const i = node.items.findIndex((item) => endOf(item) >= offset);
      if (i < 0) return path;
      path.push(String(i));
      node = node.items[i];
    } else return path;
  }
}

/**
 * The offset of the first scalar written with YAML's non-specific tag `!` alone (`PASSWORD: !`,
 * `- ! x9…`), or null. The library reads it as a plain string without a word: `!` became "" and
 * `! x9…` lost its `! `. Collections (`! {a: 1}`), quoted values (`! "x9…"`) and block scalars
 * (`! |`), whose text is all in the quotes or the block, read as written and are left alone.
 */
export function nonSpecificTagOffset(contents: unknown): number | null {
  const stack: unknown[] = [contents];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (isPair(node)) stack.push(node.value, node.key);
    else if (isScalar(node) && node.tag === "!" && (node.type ?? "PLAIN") === "PLAIN")
      return (node as Ranged).range?.[0] ?? 0;
    else if (isCollection(node)) for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i]);
  }
  return null;
}

/**
 * What is wrong with a tagged value, from the library's warning (none for a bare `!`). One of
 * YAML's own tags whose value the library cannot read as it (`!!float 1`, `!!bool yes`, `!!map x`,
 * `!!str [5]`) is named, as quoting would only make it a string (or, for `!!map`, refused again);
 * any other tag is not quoted, since it may be the value.
 */
export function tagProblem(warning: string | undefined): string {
  const core = /Unresolved tag: tag:yaml\.org,2002:(str|map|seq|int|float|bool|null|binary|timestamp)\b/.exec(
    warning ?? "",
  )?.[1];
  return core
    ? `the value does not read as its tag !!${core} says: write it without the tag`
    : "a value that begins with ! is read as a YAML tag, and this config knows none: put the value in quotes";
}
