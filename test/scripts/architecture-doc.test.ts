import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";

// docs/architecture.md is the map a newcomer reads first: every file or folder it names in
// backticks exists, and every folder of src/ is named in it (issue 27).
const ROOT = join(import.meta.dir, "..", "..");
const DOC = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

/** A backticked name that reads as a path: a `.ts` file or a folder with its trailing slash. */
const looksLikePath = (s: string) =>
  /^[\w./-]+$/.test(s) &&
  (s.endsWith(".ts") || (s.endsWith("/") && s !== "/")) &&
  !s.includes("..") &&
  !s.startsWith("dist/"); // built, not in the checkout

/** `dir` and every folder above it, up to the root. */
const upwards = (dir: string): string[] => (dir === "." ? [] : [dir, ...upwards(posix.dirname(dir))]);

/**
 * Where a name resolves, or undefined: as written from the root, under src/ (the floors and the
 * flows say `plan/`), or inside a folder named before it in its table row, or in its section for
 * prose (a row names its files relative to itself: `turn/ending.ts`, `transport/` (`framing.ts`)).
 */
function resolveName(name: string, context: Iterable<string>, root: string): string | undefined {
  const dirs = [...context].flatMap(upwards);
  const tries = [name, posix.join("src", name), ...dirs.map((d) => posix.join(d, name))];
  return tries.find((c) => existsSync(join(root, c)));
}

/** The names in `doc` that resolve nowhere under `root`, each with its line number. */
export function missingNames(doc: string, root: string): string[] {
  const missing: string[] = [];
  let section = new Set<string>();
  for (const [i, line] of doc.split("\n").entries()) {
    if (line.startsWith("#")) section = new Set();
    const context = line.startsWith("|") ? new Set<string>() : section;
    for (const [, name] of line.matchAll(/`([^`]+)`/g)) {
      if (!name || !looksLikePath(name)) continue;
      const found = resolveName(name, context, root);
      if (!found) missing.push(`${i + 1}: ${name}`);
      else context.add(found.endsWith("/") ? found.slice(0, -1) : posix.dirname(found));
    }
  }
  return missing;
}

/** The folders of src/ (at any depth) that no backticked name in `doc` resolves to. */
export function unnamedFolders(doc: string, root: string): string[] {
  const named = new Set<string>();
  for (const [, full, dir] of doc.matchAll(/`(src\/[^`]*?)([\w-]+\/)?`/g)) named.add(`${full}${dir ?? ""}`);
  const rowNames = [...doc.matchAll(/`([\w/-]+\/)`/g)].map((m) => m[1] as string);
  const folders = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .flatMap((e) => [`${dir}/${e.name}/`, ...folders(`${dir}/${e.name}`)]);
  return folders("src").filter(
    (f) => !named.has(f) && !rowNames.some((n) => f.endsWith(`/${n}`) || f === `src/${n}`),
  );
}

/** Each top-level folder of src/ has a row of its own in the Folders table. */
function foldersWithoutRow(doc: string, root: string): string[] {
  const rows = [...doc.matchAll(/^\| `(src\/[\w-]+)\//gm)].map((m) => m[1]);
  return readdirSync(join(root, "src"), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => `src/${e.name}`)
    .filter((f) => !rows.includes(f));
}

describe("docs/architecture.md", () => {
  test("every file and folder it names exists", () => {
    expect(missingNames(DOC, ROOT)).toEqual([]);
  });

  test("every folder of src/ has its row, and every folder below one is named", () => {
    expect(foldersWithoutRow(DOC, ROOT)).toEqual([]);
    expect(unnamedFolders(DOC, ROOT)).toEqual([]);
  });

  test("the checks see a planted wrong name and a folder left out", () => {
    const planted = `${DOC}\n| \`src/plan/\` | \`no-such-file.ts\`, \`decide/nothing.ts\` |\n`;
    expect(missingNames(planted, ROOT)).toEqual([
      `${DOC.split("\n").length + 1}: no-such-file.ts`,
      `${DOC.split("\n").length + 1}: decide/nothing.ts`,
    ]);
    const withoutAgent = DOC.split("\n")
      .filter((l) => !l.startsWith("| `src/agent/`"))
      .join("\n");
    expect(foldersWithoutRow(withoutAgent, ROOT)).toEqual(["src/agent"]);
  });
});
