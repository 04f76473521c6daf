import { describe, expect, test } from "bun:test";
import * as nodePath from "node:path";
import { distinctPaths, type PathReader } from "../../src/util/same-file.ts";

// One models folder configured or found two ways is one folder in `models`' `folders`. Windows'
// spellings are fed as strings, its path rules and realpath handed in.

const ON_DISK = "C:\\Users\\Ana\\Models";
/** The native realpath under Windows: the name on disk, whatever the spelling (8.3, case, `/`, `\\?\`). */
function windowsNative(path: string): string {
  const p = nodePath.win32
    .resolve(path.replace(/^\\\\\?\\(?=[A-Za-z]:)/, ""))
    .replace(/\\MODELS~1(?=\\|$)/i, "\\Models");
  if (p.toLowerCase() !== ON_DISK.toLowerCase())
    throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
  return ON_DISK;
}
const windows: PathReader = {
  rules: nodePath.win32,
  realpath: Object.assign((p: string) => p, { native: windowsNative }),
};

describe("distinctPaths on Windows", () => {
  test("a folder on disk spelled every which way is listed once, as first spelled", () => {
    const spellings = [
      ON_DISK,
      "c:\\users\\ana\\models",
      "C:/Users/Ana/Models/",
      `${ON_DISK}\\`,
      "C:\\Users\\Ana\\MODELS~1",
      `\\\\?\\${ON_DISK}`,
      "C:\\Users\\Ana\\x\\..\\Models",
    ];
    expect(distinctPaths(spellings, windows)).toEqual([ON_DISK]);
    expect(distinctPaths(spellings.slice(1), windows)).toEqual(["c:\\users\\ana\\models"]);
  });

  test("a folder that is not there: its spellings normalized and case-folded are one", () => {
    expect(distinctPaths(["D:\\Gone\\Models", "d:/gone/models/", "D:\\Gone\\.\\MODELS"], windows)).toEqual([
      "D:\\Gone\\Models",
    ]);
  });

  test("two folders stay two", () => {
    expect(distinctPaths([ON_DISK, "C:\\Users\\Ana\\Models2", "D:\\Users\\Ana\\Models"], windows)).toEqual([
      ON_DISK,
      "C:\\Users\\Ana\\Models2",
      "D:\\Users\\Ana\\Models",
    ]);
  });

  test("on Linux and macOS case still tells two folders apart", () => {
    const posix: PathReader = {
      rules: nodePath.posix,
      realpath: Object.assign((p: string) => p, {
        native: (p: string) => {
          throw Object.assign(new Error(`ENOENT: ${p}`), { code: "ENOENT" });
        },
      }),
    };
    expect(distinctPaths(["/m/Models", "/m/models", "/m/Models/"], posix)).toEqual([
      "/m/Models",
      "/m/models",
    ]);
  });
});
