import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { atOpenFileLimit } from "../fixtures/at-open-file-limit.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A walk of a memory folder that cannot list it because the core has used up its open files
// (EMFILE) learns nothing about the folder: its files are not gone, so their passages must stay.
// A child under a low `ulimit -n` meets the real limit.
const script = join(import.meta.dir, "../fixtures/folder-walk-at-limit.ts");

describe.skipIf(process.platform === "win32")("a memory folder walked at the open-file limit", () => {
  test("its indexed passages are kept, not forgotten as if its files were removed", () => {
    using dir = tmpdir();
    const { before, after } = atOpenFileLimit<{ before: string[]; after: string[] }>(script, dir.path);
    expect(before).toEqual(["file:sub/deep.md", "file:top.md"]);
    expect(after).toEqual(before);
  });
});
