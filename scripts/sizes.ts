// The size rules of docs/architecture.md, measured: no hand-written file in src/ over 400
// lines, no function (declaration, method, arrow or expression) over 80. Run it alone to see
// the offenders (`bun scripts/sizes.ts`); test/scripts/sizes.test.ts holds the tree to it.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;
/** Generated from the schemas (scripts/client-types.ts), not written by hand. */
const GENERATED = new Set(["src/client/protocol-types.ts"]);

export interface Oversize {
  file: string;
  /** The function's name as a reader finds it, or undefined for the file itself. */
  name?: string;
  line: number;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

function nameOf(node: ts.Node, sf: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name) return named.name.getText(sf);
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText(sf);
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText(sf);
  return "(anonymous)";
}

/** The functions over the limit in one file's text. */
export function oversizedFunctions(file: string, text: string, limit = MAX_FUNCTION_LINES): Oversize[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Oversize[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > limit) found.push({ file, name: nameOf(node, sf), line: start + 1, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** Every file and function of `root`/src over its limit. */
export function oversizes(root: string): Oversize[] {
  const out: Oversize[] = [];
  for (const path of sourceFiles(join(root, "src"))) {
    const file = relative(root, path);
    if (GENERATED.has(file)) continue;
    const text = readFileSync(path, "utf8");
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (lines > MAX_FILE_LINES) out.push({ file, line: 1, lines });
    out.push(...oversizedFunctions(file, text));
  }
  return out;
}

if (import.meta.main) {
  const found = oversizes(join(import.meta.dir, ".."));
  for (const o of found) {
    const what = o.name ? `function ${o.name}` : "file";
    process.stdout.write(`${o.file}:${o.line} ${what}: ${o.lines} lines\n`);
  }
  process.stdout.write(
    `${found.length} over the limits (files ${MAX_FILE_LINES}, functions ${MAX_FUNCTION_LINES})\n`,
  );
}
