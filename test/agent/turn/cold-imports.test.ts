import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const ROOT = join(import.meta.dir, "../../..");

/** Every package a module brings by static imports, its own files followed (type-only ones drop out). */
function packagesOf(entry: string): Map<string, string> {
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const seen = new Set<string>();
  const packages = new Map<string, string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const imp of transpiler.scanImports(readFileSync(file, "utf8"))) {
      if (imp.kind !== "import-statement") continue;
      if (imp.path.startsWith(".")) walk(resolve(dirname(file), imp.path));
      else if (!packages.has(imp.path)) packages.set(imp.path, file);
    }
  };
  walk(join(ROOT, entry));
  return packages;
}

describe("what a turn loads before it needs it (docs/performance.md)", () => {
  test("a turn evaluates no MCP SDK module until a tool is called: ~35 ms of a cold first chat", () => {
    const packages = packagesOf("src/agent/turn/run-turn.ts");
    expect(packages.has("zod")).toBe(true);
    const sdk = [...packages].filter(([name]) => name.startsWith("@modelcontextprotocol/"));
    expect(sdk).toEqual([]);
  });

  test("a turn evaluates no node:zlib until a PNG is checked: ~9 ms of a cold first chat", () => {
    const packages = packagesOf("src/agent/turn/run-turn.ts");
    expect(packages.has("node:fs")).toBe(true);
    expect(packages.get("node:zlib")).toBeUndefined();
  });
});
