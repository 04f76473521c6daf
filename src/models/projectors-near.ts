import { isGgufPath, isProjector } from "./pick-gguf.ts";

/**
 * Folders deeper than this are not looked at for a projector (a model deeper has none): real repos
 * hold their files a folder or two deep, and a listing's every folder is walked once.
 */
export const MAX_DEPTH = 32;

/**
 * The projectors that go with the model whose first part is `model` (repo paths, `/`-separated;
 * docs/models.md "The projector"): those in its own folder, else those of the nearest folder
 * above it, up to the repo's root; at each, else those of folders under it that hold projectors
 * only, no model on the way (`mmproj/` beside a root model: found by none, the vision was lost).
 * Never another model's folder's: a repo of models in folders of their own (`A/`, `B/`) holds
 * each one's projector beside it, and B's model given A's (first by name) got a projector of
 * another model, its width not the model's, and no vision. Sorted by path.
 *
 * Linear in the listing's length: a folder's walk up compared strings at every level, and a
 * hostile listing within the hub's bound (a model 1,900 folders deep beside 5,000 deep
 * projectors) held the loop 4 s. A folder under the model's chain is first met at one level
 * only, the deepest of the chain above it: a higher level's walk passes that one, and the first
 * level that finds any projector ends the search, so each projector folder is judged once, and
 * no folder deeper than MAX_DEPTH is walked at all.
 */
export function projectorsNear(model: string, paths: readonly string[]): string[] {
  const chain = segments(folderOf(model));
  if (chain.length > MAX_DEPTH) return [];
  const models = new FolderTrie();
  const projectors: { path: string; parts: string[] }[] = [];
  for (const p of paths) {
    if (!isGgufPath(p)) continue;
    const parts = segments(folderOf(p));
    if (parts.length > MAX_DEPTH) continue;
    if (isProjector(p)) projectors.push({ path: p, parts });
    else models.add(parts);
  }
  // Per level of the chain (0: the model's own folder, chain.length: the root), its own projectors
  // and those of the folders under it apart from any model.
  const own: string[][] = chain.map(() => []);
  own.push([]);
  const apart: string[][] = own.map(() => []);
  for (const { path, parts } of projectors) {
    const shared = sharedDepth(chain, parts);
    const level = chain.length - shared;
    if (parts.length === shared) own[level]!.push(path);
    else if (models.deepest(parts) <= shared) apart[level]!.push(path);
  }
  for (let level = 0; level <= chain.length; level++) {
    const found = own[level]!.length > 0 ? own[level]! : apart[level]!;
    if (found.length > 0) return found.sort();
  }
  return [];
}

/** A repo path's folder: `""` for the repo's root. */
function folderOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

function segments(folder: string): string[] {
  return folder === "" ? [] : folder.split("/");
}

/** How many leading folder names `a` and `b` share. */
function sharedDepth(a: readonly string[], b: readonly string[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

interface TrieNode {
  model: boolean;
  next: Map<string, TrieNode>;
}

/** The folders that hold a model, by name under name: a folder's ancestors asked in one walk. */
class FolderTrie {
  private readonly root: TrieNode = { model: false, next: new Map() };

  add(parts: readonly string[]): void {
    let node = this.root;
    for (const part of parts) {
      let next = node.next.get(part);
      if (!next) {
        next = { model: false, next: new Map() };
        node.next.set(part, next);
      }
      node = next;
    }
    node.model = true;
  }

  /** The depth of the deepest folder holding a model among `parts`' folder and those above it; -1 if none. */
  deepest(parts: readonly string[]): number {
    let node: TrieNode | undefined = this.root;
    let found = this.root.model ? 0 : -1;
    for (let i = 0; i < parts.length; i++) {
      node = node.next.get(parts[i]!);
      if (!node) break;
      if (node.model) found = i + 1;
    }
    return found;
  }
}
