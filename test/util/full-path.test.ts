import { expect, test } from "bun:test";
import { posix, win32 } from "node:path";
import { isFullPath } from "../../src/util/full-path.ts";

// A request's path (sessions.export's, documents.add's, an image's) must name one file whatever
// the core's working folder, which the host does not choose. On Windows `\x` and `C:x` do not:
// they are on the working folder's drive, or relative to that drive's own working folder.
test("Windows: a drive's path or a share's names one place; one rooted without a drive does not", () => {
  const full = [
    "C:\\x\\a.md",
    "c:/x/a.md",
    "\\\\server\\share\\a.md",
    "//server/share/a.md",
    "\\\\?\\C:\\x\\a.md",
  ];
  const partial = ["\\x\\a.md", "/x/a.md", "C:a.md", "..\\a.md"];
  expect(full.filter((p) => !isFullPath(p, win32))).toEqual([]);
  expect(partial.filter((p) => isFullPath(p, win32))).toEqual([]);
});

test("POSIX: an absolute path names one place, a relative one does not", () => {
  expect([isFullPath("/x/a.md", posix), isFullPath("\\x\\a.md", posix), isFullPath("x/a.md", posix)]).toEqual(
    [true, false, false],
  );
});
