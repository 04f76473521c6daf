import { lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { SafeIdSchema } from "../protocol/safe-id.ts";
import { IMPORTED_DIR } from "../store/import-v01.ts";
import { shellWord } from "../util/shell-word.ts";
import { controlsMarked } from "../util/terminal-text.ts";
import type { Check } from "./checks.ts";

/** The most user folders looked into for sessions: a report's work stays bounded whatever 0.1 left. */
const MAX_USERS_READ = 500;
/** The most folders named in the message and in `data.folders`. */
const MAX_NAMED = 10;
/**
 * The most folder names the check takes, all folders together: it runs on the core's loop (the
 * `doctor` method), and 500 users' 100,000 sessions held ping half a second.
 */
export const MAX_NAMES_READ = 20_000;

/** Names read so far against the bound; `stopped` once a folder had more than was left. */
interface Budget {
  left: number;
  stopped: boolean;
  /** Folders that could not be listed, each with its error code: not looked in, never "none there". */
  unlisted: string[];
}

/**
 * A folder's names, at most what `budget` has left; none when it cannot be read. Bun's
 * opendirSync reads a folder whole at its open too, so one listing is not cut short: the bound
 * is on the folders listed after it and the names checked.
 */
function namesWithin(dir: string, budget: Budget): string[] {
  let all: string[];
  try {
    all = readdirSync(dir);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== "ENOENT") budget.unlisted.push(`${dir} (${code ?? (err as Error).message})`);
    return [];
  }
  const names = all.length > budget.left ? all.slice(0, budget.left) : all;
  if (names.length < all.length) budget.stopped = true;
  budget.left -= names.length;
  return names.sort();
}

const isSafeId = (name: string): boolean => SafeIdSchema.safeParse(name).success;

/**
 * A name whose bytes are not UTF-8 (0.1 on Linux took them as they came): listed with U+FFFD in
 * their place, a name no lstat finds, so it cannot be told a folder; never an id a request gives,
 * and never a path a command can spell.
 */
const notUtf8 = (name: string): boolean => name.includes("\uFFFD");

/** A folder, not a link to one (the import and the erases never follow one: docs/agent.md). */
function isRealDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** 0.1's user trees under data_dir: `users/` (not imported yet) and those kept in `imported-0.1/`. */
function v01Trees(dataDir: string, budget: Budget): string[] {
  const aside = join(dataDir, IMPORTED_DIR);
  const kept = isRealDir(aside) ? namesWithin(aside, budget).filter((n) => n.startsWith("users")) : [];
  return [join(dataDir, "users"), ...kept.map((n) => join(aside, n))].filter(isRealDir);
}

/**
 * `v01_data` (docs/doctor.md), present only where 0.1's files are: a user or session folder there
 * whose name the protocol cannot give (a Windows device name such as `nul`, which 0.1 let
 * through; a name with a space) is neither imported nor reached by `users.delete` or
 * `sessions.delete`, which take only such ids: its words stay under data_dir whatever the host
 * erases, and only a person can remove them. Read only; links are not followed.
 */
export function v01DataCheck(config: Config, maxNames = MAX_NAMES_READ): Check | undefined {
  const budget: Budget = { left: maxNames, stopped: false, unlisted: [] };
  const trees = v01Trees(config.app.data_dir, budget);
  if (trees.length === 0) return undefined;
  const unreachable: string[] = [];
  let usersRead = 0;
  for (const tree of trees) {
    for (const user of namesWithin(tree, budget)) {
      const path = join(tree, user);
      if (!isRealDir(path) && !notUtf8(user)) continue;
      if (!isSafeId(user)) {
        unreachable.push(path);
        continue;
      }
      if (usersRead++ >= MAX_USERS_READ) continue;
      const sessions = join(path, "sessions");
      if (!isRealDir(sessions)) continue;
      for (const s of namesWithin(sessions, budget))
        if (!isSafeId(s) && (notUtf8(s) || isRealDir(join(sessions, s)))) unreachable.push(join(sessions, s));
    }
  }
  const named = unreachable.slice(0, MAX_NAMED).map(controlsMarked);
  const data = {
    trees: trees.map(controlsMarked),
    folders: named,
    unreachable: unreachable.length,
    complete: !budget.stopped && budget.unlisted.length === 0,
  };
  const partial = partialText(budget, maxNames);
  if (unreachable.length === 0 && budget.unlisted.length > 0)
    return {
      id: "v01_data",
      status: "warn",
      message: `0.1 data in ${data.trees.join(", ")}${partial}`,
      fix: "give the core's user read access to those folders, then run doctor again",
      data,
    };
  if (unreachable.length === 0)
    return { id: "v01_data", status: "ok", message: `0.1 data in ${data.trees.join(", ")}${partial}`, data };
  const more = unreachable.length > MAX_NAMED ? ` and ${unreachable.length - MAX_NAMED} more` : "";
  const first = unreachable[0]!;
  // A command only for a name it can spell: one with a control character shown as `?` is another path.
  const command =
    controlsMarked(first) !== first || notUtf8(first)
      ? ""
      : ` (rm -r ${shellWord(first)}${unreachable.length > 1 ? " …" : ""})`;
  return {
    id: "v01_data",
    status: "warn",
    message: `${unreachable.length} 0.1 user or session folder(s) have a name no request can give, so no users.delete or sessions.delete erases them: ${named.join(", ")}${more}${partial}`,
    fix: `remove them by hand once their conversations are no longer wanted${command}`,
    data,
  };
}

/** What the check did not look at: folders past the bound, and those it could not list (EACCES). */
function partialText(budget: Budget, maxNames: number): string {
  const stopped = budget.stopped ? ` (only the first ${maxNames} folder names were checked)` : "";
  const shown = budget.unlisted.slice(0, MAX_NAMED).map(controlsMarked);
  const more = budget.unlisted.length > MAX_NAMED ? ` and ${budget.unlisted.length - MAX_NAMED} more` : "";
  const unlisted = shown.length > 0 ? `; these folders could not be listed: ${shown.join(", ")}${more}` : "";
  return `${stopped}${unlisted}`;
}
