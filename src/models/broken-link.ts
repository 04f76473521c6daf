import { lstatSync, statSync } from "node:fs";
import type { ModelEntry } from "../protocol/models.ts";

/**
 * The first part that is a link leading nowhere, and why: a missing blob, or links that lead in a
 * circle. A folder's link is a person's own, not the cache's: it is named as a plain link.
 */
export function brokenLinkOf(parts: readonly string[], source: ModelEntry["source"]): string | undefined {
  const whose = source === "hf_cache" ? "the cache's link" : "the link";
  const target = source === "hf_cache" ? "a missing blob" : "a file that is not there";
  for (const path of parts) {
    let link = false;
    try {
      link = lstatSync(path).isSymbolicLink();
    } catch {}
    if (!link) continue;
    try {
      statSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ELOOP") return `${path}: ${whose} leads in a circle (a symbolic-link loop)`;
      // A target the core may not read (EACCES) is there: the read's own failure says so.
      if (code === "ENOENT" || code === "ENOTDIR") return `${path}: ${whose} points at ${target}`;
    }
  }
  return undefined;
}
