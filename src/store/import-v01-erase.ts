import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "./atomic.ts";
import { IMPORTED_DIR, readJson, TurnsSchema } from "./import-v01.ts";

/** Every 0.1 folder tree that may hold a user's files: in place, or kept aside after import. */
function userTrees(dataDir: string, userId: string): string[] {
  const trees = [join(dataDir, "users", userId)];
  const aside = join(dataDir, IMPORTED_DIR);
  if (existsSync(aside)) {
    for (const e of readdirSync(aside)) if (e.startsWith("users")) trees.push(join(aside, e, userId));
  }
  return trees.filter((t) => existsSync(t));
}

/**
 * Erases a user's (or one session's) text from the 0.1 files: the folders go, and the memory
 * files lose that session's entries (a memory file that cannot be parsed goes when it names
 * the session, since its valid entries were imported already). A session's erase reads and
 * rewrites each of the user's memory files whole (up to 256 MiB each: about a second per
 * 100 MB), so it runs on the store's thread (Store.deleteSession), never on the main loop.
 */
export function eraseImported(dataDir: string, userId: string, sessionId?: string): void {
  for (const tree of userTrees(dataDir, userId)) {
    if (sessionId === undefined) {
      rmSync(tree, { recursive: true, force: true });
      continue;
    }
    rmSync(join(tree, "sessions", sessionId), { recursive: true, force: true });
    const memory = join(tree, "memory");
    if (!existsSync(memory)) continue;
    for (const name of readdirSync(memory)) {
      if (name.startsWith("turns.json")) dropSessionTurns(join(memory, name), sessionId);
    }
  }
}

function dropSessionTurns(path: string, sessionId: string): void {
  let value: unknown;
  try {
    value = readJson(path);
  } catch (err) {
    // Unparseable (its valid entries were imported): it goes when it names the session.
    if (!(err instanceof SyntaxError)) return;
    if (readFileSync(path, "utf8").includes(JSON.stringify(sessionId))) rmSync(path, { force: true });
    return;
  }
  try {
    const file = TurnsSchema.parse(value);
    const kept = file.turns.filter((t) => (t as { session_id?: unknown })?.session_id !== sessionId);
    if (kept.length !== file.turns.length) writeFileAtomic(path, JSON.stringify({ version: 1, turns: kept }));
  } catch {
    if (JSON.stringify(value).includes(JSON.stringify(sessionId))) rmSync(path, { force: true });
  }
}
