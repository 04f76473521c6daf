import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { oversizes } from "../../scripts/sizes.ts";

// The shape docs/architecture.md promises, held to the code: floors that import only
// downwards, no file in a circle, one home for llama-server's HTTP, and the size rules.
const ROOT = join(import.meta.dir, "..", "..");
const SRC = join(ROOT, "src");

/** Each folder's floor (docs/architecture.md "Floors"): a file imports only from its floor or below. */
const FLOOR: Record<string, number> = {
  util: 0,
  platform: 0,
  "version.ts": 0,
  protocol: 1,
  config: 2,
  client: 2,
  store: 3,
  documents: 3,
  images: 3,
  rpc: 3,
  llama: 4,
  plan: 5,
  models: 6,
  runtime: 7,
  agent: 8,
  doctor: 8,
  methods: 9,
  server: 10,
  cli: 11,
  "index.ts": 12,
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** The src/ files a file imports (static imports, re-exports, and `require`/`import()` of a path). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^"'`;]*?from\s*["']([^"']+)["']/g),
    ...text.matchAll(/(?:^|\n)\s*import\s*["']([^"']+)["']/g),
    ...text.matchAll(/(?:require|import)\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1] as string);
  return specs.filter((s) => s.startsWith(".")).map((s) => resolve(dirname(file), s));
}

const floorOf = (file: string) => FLOOR[relative(SRC, file).split("/")[0] as string];

describe("the house", () => {
  const files = sourceFiles(SRC);
  const graph = new Map(files.map((f) => [f, importsOf(f).filter((i) => i.startsWith(SRC))]));

  test("every folder of src/ has a floor", () => {
    expect(files.filter((f) => floorOf(f) === undefined).map((f) => relative(ROOT, f))).toEqual([]);
  });

  test("no import runs back up a floor", () => {
    const up: string[] = [];
    for (const [file, imports] of graph) {
      for (const target of imports) {
        if ((floorOf(target) ?? 0) > (floorOf(file) ?? 0))
          up.push(`${relative(ROOT, file)} -> ${relative(ROOT, target)}`);
      }
    }
    expect(up).toEqual([]);
  });

  test("no files import each other in a circle", () => {
    const state = new Map<string, "open" | "done">();
    const circles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === "done") return;
      if (state.get(f) === "open") {
        circles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(SRC, p)).join(" -> "));
        return;
      }
      state.set(f, "open");
      for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
      state.set(f, "done");
    };
    for (const f of files) visit(f, []);
    expect(circles).toEqual([]);
  });

  test("only src/llama/ talks HTTP to llama-server (the hub client and the host client keep their own)", () => {
    const own = (f: string) => /^(llama|client)\/|^models\/hub-/.test(relative(SRC, f));
    const callers = files.filter((f) => !own(f) && /\bfetch\(/.test(readFileSync(f, "utf8")));
    expect(callers.map((f) => relative(ROOT, f))).toEqual([]);
  });

  test("no hand-written file over 400 lines, no function over 80", () => {
    expect(oversizes(ROOT).map((o) => `${o.file}:${o.line} ${o.name ?? "file"} ${o.lines}`)).toEqual([]);
  });

  test("the code cites the project's own docs, not a contract outside the repository", () => {
    const code = ["src", "test", "bench", "scripts"].flatMap((d) => sourceFiles(join(ROOT, d)));
    const outside = code.flatMap((f) =>
      readFileSync(f, "utf8")
        .split("\n")
        .flatMap((line, i) =>
          /\bSPEC( §| sections?)? ?\d/.test(line) ? [`${relative(ROOT, f)}:${i + 1}`] : [],
        ),
    );
    expect(outside).toEqual([]);
  });
});
