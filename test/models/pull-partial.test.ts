import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { partialSize } from "../../src/models/pull-blob.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

test("a partial download's size is read in one look: none there (renamed into place meanwhile) is 0, never a throw", () => {
  using dir = tmpdir();
  const incomplete = join(dir.path, "blob.incomplete");
  expect(partialSize(incomplete)).toBe(0);
  writeFileSync(incomplete, "12345");
  expect(partialSize(incomplete)).toBe(5);
});
