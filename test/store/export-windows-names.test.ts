import { describe, expect, test } from "bun:test";
import { posix, win32 } from "node:path";
import { namesFolder, windowsUnfitName } from "../../src/store/export-file.ts";

// sessions.export renames its file in by the path's last name: a path that has none names a
// folder and is refused (EISDIR), by Windows' path rules as by POSIX's.
describe("an export path that names a folder", () => {
  test("POSIX: a trailing slash, `.`, `..`, the root", () => {
    for (const p of ["/tmp/out/", "/tmp/out/.", "/tmp/out/..", "/"]) expect(namesFolder(p, posix)).toBe(true);
    expect(namesFolder("/tmp/out/a.md", posix)).toBe(false);
  });

  test("Windows: either separator at the end, `.`, `..`, a drive's root", () => {
    for (const p of ["C:\\out\\", "C:\\out/", "C:\\out\\.", "C:\\out\\..", "C:\\", "\\\\?\\C:\\"])
      expect(namesFolder(p, win32)).toBe(true);
    expect(namesFolder("C:\\out\\a.md", win32)).toBe(false);
  });

  // path.win32 reads a share's root as its own folder with the share's name as the last part:
  // `\\server\share` was written as `\\server\share\share`, a file the host never named.
  test("Windows: a share's root, with or without its separator, names a folder", () => {
    for (const p of ["\\\\server\\share", "\\\\localhost\\C$", "//server/share"])
      expect(namesFolder(p, win32)).toBe(true);
    expect(namesFolder("\\\\server\\share\\a.md", win32)).toBe(false);
    expect(namesFolder("\\\\?\\UNC\\server\\share\\a.md", win32)).toBe(false);
  });
});

// Bun opens a Windows path as an NT path, as it is: run under Wine, an export to `out\CON`,
// `out\NUL` or `out\a.md:stream` was written under that very name, where Win32 calls (Explorer,
// a Node host) take CON and NUL for devices and drop a trailing dot or space, so none could open
// or delete the file; on NTFS a ':' is another file's stream, which the rename cannot make.
describe("an export's file name that Windows programs cannot open", () => {
  test("a stream, a trailing dot or space, a device's name (any case, any extension) are unfit", () => {
    for (const name of [
      "a.md:stream",
      "local-ai.db::$DATA",
      "report.md.",
      "report.md ",
      "CON",
      "nul",
      "NUL.txt",
      "com1.md",
      "LPT9",
      "AUX .md",
      "CONOUT$",
      "COM¹",
    ])
      expect(windowsUnfitName(name)).toBeString();
  });

  test("ordinary names, and names that only start like a device's, are fit", () => {
    for (const name of [
      "a.md",
      "export.json",
      ".hidden.md",
      "CONSOLE.md",
      "null.txt",
      "COM10.md",
      "LPT.md",
      "con-notes.md",
      "é.md",
    ])
      expect(windowsUnfitName(name)).toBeUndefined();
  });
});
