import { renameSync } from "node:fs";

/**
 * Moves a file the core cannot use to `<path>.corrupt-<time>` and returns that path: kept for
 * the user to inspect or recover, never deleted or written over. Throws what rename throws.
 */
export function moveAside(path: string, now: Date): string {
  const aside = `${path}.corrupt-${now.toISOString().replace(/[:.]/g, "-")}`;
  renameSync(path, aside);
  return aside;
}
