import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { atOpenFileLimit } from "../fixtures/at-open-file-limit.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// EMFILE says the core has used up its open files, nothing of the file or folder a request named:
// answered as the host's fault (`invalid_request`, "cannot be read", `path_unwritable`), it sends
// a user to fix a file that is fine. A child under a low `ulimit -n` meets the real limit.
const script = join(import.meta.dir, "../fixtures/open-files-used-up.ts");
type Seen = { what: string; code?: string; message?: string; data?: { problem?: string } };

describe.skipIf(process.platform === "win32")("the core's open files used up (EMFILE)", () => {
  test("a document, an image and an export to a path fail internal_error naming the limit", () => {
    using dir = tmpdir();
    const seen = atOpenFileLimit<Seen[]>(script, dir.path);
    expect(seen.map((s) => s.what)).toEqual(["document", "image", "export"]);
    for (const s of seen) {
      expect(s).toMatchObject({ code: "internal_error", data: { problem: "EMFILE" } });
      expect(s.message).toContain("too many files open");
    }
  });
});
