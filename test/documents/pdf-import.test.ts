import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

// unpdf's index calls `import.meta.resolve`, which the compiled binary's CommonJS bundle cannot
// parse (the whole binary fails to load: checked by compiling with scripts/compile.ts's flags);
// pdf.js is imported as `unpdf/pdfjs` instead (docs/agent.md "Documents").
test("no file of src/ imports unpdf's index", () => {
  const src = join(import.meta.dir, "..", "..", "src");
  const files = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
  const importers = files.filter((f) => /["']unpdf["']/.test(readFileSync(join(src, f), "utf8")));
  expect(importers).toEqual([]);
});
