import { describe, expect, test } from "bun:test";
import * as nodePath from "node:path";
import { windowsDevicePath } from "../../src/util/device-path.ts";

// On Windows a stat or an open of `\\.\pipe\name` connects to the pipe's server, and of `NUL`,
// `COM1`, `C:\m\con.gguf` opens the device: a path given as a model, a document or an image is
// refused by its spelling before either. Windows' spellings are fed as strings, its rules handed in.

const win = (path: string) => windowsDevicePath(path, nodePath.win32);

describe("windowsDevicePath", () => {
  test("the device namespace, a pipe or mailslot share, a reserved name in any folder: refused", () => {
    const refused = {
      "\\\\.\\pipe\\local-ai-x": "device namespace",
      "//./pipe/local-ai-x": "device namespace",
      "\\\\.\\C:\\m\\m.gguf": "device namespace",
      "\\\\?\\GLOBALROOT\\Device\\NamedPipe\\x": "device namespace",
      "\\\\?\\pipe\\x": "device namespace",
      "\\??\\C:\\m.gguf": "device namespace",
      "\\\\server\\pipe\\x": "named pipe",
      "\\\\localhost\\PIPE\\x": "named pipe",
      "\\\\?\\UNC\\server\\pipe\\x": "named pipe",
      "\\\\server\\mailslot\\x": "mailslot",
      NUL: "device NUL",
      "C:\\models\\NUL.gguf": "device NUL",
      "c:/models/con .txt": "device con",
      "C:\\models\\COM1:": "device COM1",
      "C:\\models\\lpt¹": "device lpt¹",
      "C:nul": "device nul",
      "C:\\aux\\m.gguf": "device aux",
      CONIN$: "device CONIN$",
      "C:\\m\\prn.": "device prn",
    };
    for (const [path, why] of Object.entries(refused)) expect(win(path), path).toContain(why);
  });

  test("files, long spellings of a file, UNC shares and names that merely start like a device: allowed", () => {
    for (const path of [
      "C:\\models\\m.gguf",
      "C:/models/m.gguf",
      "\\\\?\\C:\\models\\m.gguf",
      "\\\\?\\C:\\models\\nul", // under \\?\ every name is taken as written
      "\\\\?\\UNC\\server\\share\\m.gguf",
      "\\\\?\\Volume{2ec3d8b4-0000-0000-0000-100000000000}\\m.gguf",
      "\\\\server\\share\\m.gguf",
      "\\\\server\\pipes\\m.gguf",
      "C:\\models\\console.gguf",
      "C:\\models\\nullable\\m.gguf",
      "C:\\models\\com10.gguf",
      "D:\\auxiliary\\m.gguf",
    ])
      expect(win(path), path).toBeNull();
  });

  test("on Linux and macOS such names are files like any other", () => {
    for (const path of ["/m/nul.gguf", "/m/COM1", "\\\\.\\pipe\\x"])
      expect(windowsDevicePath(path, nodePath.posix)).toBeNull();
  });
});
