import { describe, expect, test } from "bun:test";
import { win32 } from "node:path";
import { configPath } from "../../src/config/load.ts";

// A config path is absolute, `~/`, or relative to the config's folder (docs/bootstrap.md). On
// Windows `\data` is none of them: path.win32 calls it absolute, yet it names a folder on the
// drive of the core's working folder, which the host chooses at each start; a data_dir so written
// moved with it, and the user's conversations seemed gone.
describe("a config path on Windows", () => {
  const dir = "D:\\Users\\zoe\\AppData\\Local\\App";
  const home = "C:\\Users\\zoe";

  test("rooted without a drive, it is on the config's drive", () => {
    expect(configPath(dir, "\\LocalAI\\data", home, win32)).toBe("D:\\LocalAI\\data");
    expect(configPath(dir, "/LocalAI/data", home, win32)).toBe("D:\\LocalAI\\data");
  });

  test("with a drive or a share, it is as written; relative, under the config's folder", () => {
    expect(configPath(dir, "C:\\models\\a.gguf", home, win32)).toBe("C:\\models\\a.gguf");
    expect(configPath(dir, "\\\\server\\share\\a.gguf", home, win32)).toBe("\\\\server\\share\\a.gguf");
    expect(configPath(dir, "//server/share/a.gguf", home, win32)).toBe("//server/share/a.gguf");
    expect(configPath(dir, "models\\a.gguf", home, win32)).toBe(`${dir}\\models\\a.gguf`);
  });
});
