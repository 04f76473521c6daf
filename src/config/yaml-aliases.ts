import { isAlias, isCollection, isPair, isScalar } from "yaml";
import { pathAt } from "./yaml-keys.ts";

/**
 * Nodes that aliases may copy into a config, all aliases together. A real config that shares
 * a list of args or an env block copies a few dozen; nested aliases (the "billion laughs")
 * reach millions, which the yaml library only stops when converting, with no line to report.
 */
export const MAX_ALIAS_NODES = 10_000;

/**
 * Anchors a config may set. The yaml library resolves each alias by walking every anchor and
 * alias before it, so 90,000 anchors and 10,000 aliases (700 KB) held the loader 6 s; a real
 * config sets a few.
 */
export const MAX_ANCHORS = 1000;

export interface AliasProblem {
  /** Offset of the offending alias in the text. */
  offset: number;
  message: string;
  /**
   * An alias with no anchor: its name (which may be a value that begins with `*`, a password)
   * and the keys down to it, for the loader to decide whether to quote it.
   */
  unanchored?: { name: string; path: string[] };
}

/** The parts of a yaml node this check reads (a document's contents is one). */
interface YamlNode {
  anchor?: string;
  range?: [number, number, number] | null;
}

/**
 * Checks a parsed document's aliases before it is converted to plain data, so every way that
 * conversion can fail because of an alias is reported with the alias's position: an alias with
 * no anchor before it, an alias inside the node its anchor names (a cycle), and aliases that
 * copy more than MAX_ALIAS_NODES nodes. Resolution follows YAML's rule, as the library does:
 * the latest anchor of that name before the alias in document order.
 */
export function aliasProblem(contents: unknown): AliasProblem | null {
  const anchors = new Map<string, unknown>();
  /** Expanded size of every finished node; a node being walked is absent (its aliases are cycles). */
  const sizes = new Map<unknown, number>();
  let copied = 0;
  let anchored = 0;
  let problem: AliasProblem | null = null;
  /** The keys (a list's index as digits) down to the node being walked. */
  const path: string[] = [];

  const size = (node: unknown): number => {
    if (problem || node === null || node === undefined) return 0;
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      const offset = (node as YamlNode).range?.[0] ?? 0;
      if (target === undefined) {
        problem = {
          offset,
          message: `alias *${node.source} has no anchor &${node.source} before it (a value that begins with * goes in quotes)`,
          unanchored: { name: node.source, path: [...path] },
        };
        return 0;
      }
      const n = sizes.get(target);
      if (n === undefined) {
        problem = { offset, message: `alias *${node.source} is inside the node its anchor names (a cycle)` };
        return 0;
      }
      copied += n;
      if (copied > MAX_ALIAS_NODES) {
        problem = {
          offset,
          message: `aliases copy more than ${MAX_ALIAS_NODES} nodes (alias *${node.source}); expand them by hand`,
        };
      }
      return n;
    }
    const anchor = (node as YamlNode).anchor;
    if (anchor) {
      anchors.set(anchor, node);
      if (++anchored > MAX_ANCHORS) {
        const offset = (node as YamlNode).range?.[0] ?? 0;
        problem = { offset, message: `more than ${MAX_ANCHORS} anchors (&${anchor}); a config needs a few` };
        return 0;
      }
    }
    let n = 1;
    if (isPair(node)) {
      n = size(node.key);
      path.push(isScalar(node.key) ? String(node.key.value) : "?");
      n += size(node.value);
      path.pop();
    } else if (isCollection(node)) {
      node.items.forEach((item, i) => {
        if (!isPair(item)) path.push(String(i));
        n += size(item);
        if (!isPair(item)) path.pop();
      });
    } else if (!isScalar(node)) n = 0;
    sizes.set(node, n);
    return n;
  };

  size(contents);
  return problem;
}

/**
 * The first scalar that sets an anchor no alias names, where `secret(path)` says a value may be
 * a secret: YAML reads a value that begins with `&` as an anchor's name and the rest as the value,
 * so `PASSWORD: &x9… rest` reached the MCP server as `rest` (and `&x9…` alone as null) without a
 * word. Elsewhere such an anchor is left alone (kept for an alias to come). Null when none.
 */
export function unusedSecretAnchor(
  contents: unknown,
  secret: (path: string[]) => boolean,
): { offset: number; path: string[] } | null {
  // In document order, an alias names the latest anchor of its name before it (YAML's rule, as
  // aliasProblem's): a name used elsewhere does not make an earlier anchor of that name used.
  const latest = new Map<string, unknown>();
  const used = new Set<unknown>();
  const anchored: unknown[] = [];
  const stack: unknown[] = [contents];
  while (stack.length > 0) {
    const node = stack.pop();
    // An empty document, or a key with no value: no node (null), never the walk's end.
    if (node === null || node === undefined) continue;
    if (isAlias(node)) used.add(latest.get(node.source));
    else if (isPair(node)) stack.push(node.value, node.key);
    else {
      const anchor = (node as YamlNode).anchor;
      if (anchor) latest.set(anchor, node);
      if (isCollection(node)) for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i]);
      else if (isScalar(node) && anchor) anchored.push(node);
    }
  }
  for (const node of anchored) {
    if (!isScalar(node) || used.has(node)) continue;
    const offset = (node as YamlNode).range?.[0] ?? 0;
    const path = pathAt(contents, offset);
    if (secret(path)) return { offset, path };
  }
  return null;
}
