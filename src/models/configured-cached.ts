import { posix } from "node:path";
import type { ModelRef } from "../protocol/model-ref.ts";
import type { Candidate } from "./list-candidates.ts";
import { pickGguf } from "./pick-gguf.ts";

const COMMIT = /^[0-9a-f]{40}$/;

/**
 * Where the `models` listing's cache walk found an `hf:` reference's file (its first part), from
 * the walk's candidates alone, as resolve.ts `resolveCached` picks it from the disk: the commit
 * its revision names (a commit whose snapshot was walked, or the one a ref read off the loop
 * names), then the file or quantization among that snapshot's GGUFs; null when the walk did not
 * find it whole. No disk is read: the synchronous resolve read a ref file and listed a snapshot,
 * and a ref whose read off the loop did not answer (said nowhere) hung the core on a dead share.
 */
export function cachedPathOf(ref: ModelRef, cached: readonly Candidate[]): string | null {
  const mine = cached.filter((c) => c.source === "hf_cache" && c.repo === ref.repo);
  const commit =
    COMMIT.test(ref.revision) && mine.some((c) => c.commit === ref.revision)
      ? ref.revision
      : mine.find((c) => c.refs.includes(ref.revision))?.commit;
  if (!commit) return null;
  const inSnapshot = mine.filter((c) => c.commit === commit);
  // Each part's name in the repo: a split's parts lie in its first part's folder.
  const names = inSnapshot.flatMap((c) => {
    const folder = posix.dirname(c.file);
    return c.parts.map((p) => posix.join(folder, p.split(/[\\/]/).pop()!));
  });
  const pick = pickGguf(names, ref);
  if (pick.kind !== "one" || pick.group.missing.length > 0) return null;
  return inSnapshot.find((c) => c.file === pick.group.first)?.parts[0] ?? null;
}
