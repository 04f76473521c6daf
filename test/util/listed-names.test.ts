import { expect, test } from "bun:test";
import { listedNames, namesText, quotedNames } from "../../src/util/listed-names.ts";

// One home for the bounded names the models' errors, KV erases and the tool registry's warnings give.
test("names in a message and in an error's data, bounded", () => {
  const names = Array.from({ length: 120 }, (_, i) => `n${i}`);
  expect(namesText(names.slice(0, 2))).toBe("n0, n1");
  expect(namesText(names, 2)).toBe("n0, n1, … (120 in all)");
  expect(namesText(names, 2, "; ")).toBe("n0; n1; … (120 in all)");
  expect(listedNames("files", names)).toEqual({ files: names.slice(0, 100), files_count: 120 });
  expect(quotedNames(["a", "b"])).toBe("'a', 'b'");
  expect(quotedNames(["a", "b", "c", "d", "e"])).toBe("'a', 'b', 'c' and 2 more");
});
