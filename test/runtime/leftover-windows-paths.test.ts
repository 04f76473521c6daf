import { describe, expect, test } from "bun:test";
import * as nodePath from "node:path";
import { judgeLeftover } from "../../src/runtime/leftover-verdict.ts";
import { type PathReader, sameFile } from "../../src/util/same-file.ts";

// Whether a leftover llama-server is ours, on Windows, when the record and the process spell its
// executable differently. A false "not ours" leaves an orphan holding the model's memory; a false
// "ours" kills another program.

const LLAMA = "C:\\Program Files\\llama.cpp\\llama-server.exe";
const OTHER = "C:\\Program Files\\Other\\llama-server.exe";
const ON_DISK = [LLAMA, OTHER, "D:\\tools\\llama-server.exe"];
/** 8.3 short names (as GetShortPathNameW gives them) and a `subst L: "C:\Program Files\llama.cpp"`. */
const SHORT: [RegExp, string][] = [
  [/^L:(?=\\|$)/i, "C:\\Program Files\\llama.cpp"],
  [/\\PROGRA~1(?=\\|$)/i, "\\Program Files"],
  [/\\LLAMA~1\.CPP(?=\\|$)/i, "\\llama.cpp"],
  [/\\LLAMA-~1\.EXE$/i, "\\llama-server.exe"],
];

/**
 * Bun's two realpath calls on Windows, as measured under Wine: the native one
 * (GetFinalPathNameByHandle) answers the name on disk whatever the spelling; the other turns `/`
 * into `\` and keeps the rest as given (short names, case, `\\?\`).
 */
function windowsNative(path: string): string {
  let p = path.replaceAll("/", "\\").replace(/^\\\\\?\\(?=[A-Za-z]:)/, "");
  for (const [short, long] of SHORT) p = p.replace(short, long);
  const found = ON_DISK.find((f) => f.toLowerCase() === p.toLowerCase());
  if (!found) throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
  return found;
}
function windowsPlain(path: string): string {
  windowsNative(path); // there, or ENOENT
  return path.replaceAll("/", "\\");
}
const windows: PathReader = {
  rules: nodePath.win32,
  realpath: Object.assign(windowsPlain, { native: windowsNative }),
};

const SPELLINGS = [
  LLAMA,
  "C:\\PROGRA~1\\LLAMA~1.CPP\\LLAMA-~1.EXE",
  "c:\\program files\\LLAMA.CPP\\Llama-Server.EXE",
  `\\\\?\\${LLAMA}`,
  "C:/Program Files/llama.cpp/llama-server.exe",
  "L:\\llama-server.exe",
];

/** What windowsProcessIdentity reads: the creation time and the image path, which is the cmdline too. */
const running = (exe: string) => ({ start_time: "133000000000000000", cmdline: exe, exe });
const record = (binary: string) => ({
  start_time: "133000000000000000",
  binary,
  argv: ["-m", "C:\\models\\m.gguf", "--port", "4242"],
});
const same = (a: string, b: string) => sameFile(a, b, windows);

describe("a leftover llama-server on Windows, its executable spelled two ways", () => {
  test("every spelling of our executable, in the record or as the process shows it, is ours", () => {
    for (const spelled of SPELLINGS) {
      expect(judgeLeftover(record(spelled), running(LLAMA), [spelled], same)).toEqual({ verdict: "ours" });
      expect(judgeLeftover(record(LLAMA), running(spelled), [LLAMA], same)).toEqual({ verdict: "ours" });
      // The config spells it one way, find-binary (the record) another.
      expect(judgeLeftover(record(spelled), running(LLAMA), [LLAMA], same)).toEqual({ verdict: "ours" });
    }
  });

  test("another program at the pid, however spelled, is not ours: never signalled", () => {
    for (const exe of [OTHER, "c:\\program files\\other\\LLAMA-SERVER.EXE", "D:\\tools\\llama-server.exe"]) {
      for (const spelled of SPELLINGS)
        expect(judgeLeftover(record(spelled), running(exe), [spelled], same).verdict).toBe("unexplained");
    }
    // A path that is not there is not ours either, however close its spelling.
    expect(same(LLAMA, `${LLAMA}.old`)).toBe(false);
    expect(same(`${LLAMA}.old`, `${LLAMA}.OLD`)).toBe(false);
  });

  test("on Linux and macOS case still tells two files apart", () => {
    const files = ["/opt/llama/llama-server", "/opt/Llama/llama-server"];
    const real = (p: string) => {
      if (!files.includes(p)) throw Object.assign(new Error(`ENOENT: ${p}`), { code: "ENOENT" });
      return p;
    };
    const posix: PathReader = { rules: nodePath.posix, realpath: Object.assign(real, { native: real }) };
    expect(sameFile(files[0]!, files[1]!, posix)).toBe(false);
    expect(sameFile(files[0]!, files[0]!.toUpperCase(), posix)).toBe(false);
  });
});

describe("a leftover llama-server run from a share (UNC path or mapped drive)", () => {
  const UNC = "\\\\server\\tools\\llama-server.exe";
  /**
   * The native realpath of a file on a share answers its UNC name (GetFinalPathNameByHandle's
   * `\\?\UNC\…`, `\\?\` dropped) whether it was spelled `\\server\tools\…` or `Z:\…` where Z: is
   * mapped to it; a share that does not answer, or a drive not mapped in this logon session,
   * throws.
   */
  function onShare(reachable: { unc: boolean; drive: boolean }): PathReader {
    const native = (path: string) => {
      const p = path.replaceAll("/", "\\").toLowerCase();
      if (p === UNC.toLowerCase() && reachable.unc) return UNC;
      if (p === "z:\\llama-server.exe" && reachable.drive) return UNC;
      throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
    };
    return { rules: nodePath.win32, realpath: Object.assign((p: string) => p, { native }) };
  }

  test("both spellings resolved: ours", () => {
    const os = onShare({ unc: true, drive: true });
    const same = (a: string, b: string) => sameFile(a, b, os);
    expect(
      judgeLeftover(record("Z:\\llama-server.exe"), running(UNC), ["Z:\\llama-server.exe"], same),
    ).toEqual({
      verdict: "ours",
    });
  });

  test("either one not resolvable now (share offline, drive not mapped for this core): not ours, left running", () => {
    for (const reachable of [
      { unc: false, drive: true },
      { unc: true, drive: false },
    ]) {
      const same = (a: string, b: string) => sameFile(a, b, onShare(reachable));
      const verdict = judgeLeftover(
        record("Z:\\llama-server.exe"),
        running(UNC),
        ["Z:\\llama-server.exe"],
        same,
      );
      expect(verdict.verdict).toBe("unexplained");
    }
  });
});
