import { describe, expect, test } from "bun:test";
import {
  windowsPidAlive,
  windowsProcessIdentity,
  windowsResidentBytes,
} from "../../../src/platform/windows/process.ts";
import { fakeKernel32 } from "./fake-kernel32.ts";

const EXE = "C:\\Program Files\\Zoë's app\\resources\\llama-server.exe";
const table = () => ({
  4242: { workingSet: 512n * 1024n * 1024n, created: 134_406_334_879_770_781n, exe: EXE },
  77: { workingSet: 1n, created: 1n, exe: "C:\\gone.exe", exited: true },
  8: { workingSet: 1n, created: 1n, exe: "C:\\Windows\\System32\\lsass.exe", denied: true },
});

describe("a process's resident memory", () => {
  test("is its working set, and the handle is closed again", () => {
    const fake = fakeKernel32(table());
    expect(windowsResidentBytes(4242, fake.k)).toBe(512 * 1024 * 1024);
    expect(fake.calls).toEqual(["OpenProcess", "CloseHandle"]);
    expect(fake.openHandles()).toBe(0);
  });

  test("is null for no such pid, a refused call, a bad pid or no binding", () => {
    const fake = fakeKernel32(table(), { fail: new Set(["K32GetProcessMemoryInfo"]) });
    expect(windowsResidentBytes(4242, fake.k)).toBeNull();
    expect(fake.openHandles()).toBe(0);
    expect(windowsResidentBytes(31337, fakeKernel32(table()).k)).toBeNull();
    for (const pid of [0, -1, 1.5, Number.NaN, 2 ** 32]) {
      const untouched = fakeKernel32(table());
      expect(windowsResidentBytes(pid, untouched.k)).toBeNull();
      expect(untouched.calls).toEqual([]);
    }
    expect(windowsResidentBytes(4242, null)).toBeNull();
  });
});

describe("a process's identity", () => {
  test("is its creation time and executable path", () => {
    const fake = fakeKernel32(table());
    expect(windowsProcessIdentity(4242, fake.k)).toEqual({
      start_time: "134406334879770781",
      cmdline: EXE,
      exe: EXE,
    });
    expect(fake.openHandles()).toBe(0);
  });

  test("keeps the start time when the path is refused, and is null without a start time", () => {
    const noPath = fakeKernel32(table(), { fail: new Set(["QueryFullProcessImageNameW"]) });
    expect(windowsProcessIdentity(4242, noPath.k)).toEqual({ start_time: "134406334879770781", cmdline: "" });
    const noTimes = fakeKernel32(table(), { fail: new Set(["GetProcessTimes"]) });
    expect(windowsProcessIdentity(4242, noTimes.k)).toBeNull();
    expect(noTimes.openHandles()).toBe(0);
    expect(windowsProcessIdentity(31337, fakeKernel32(table()).k)).toBeNull();
  });
});

describe("whether a pid is alive", () => {
  test("running, exited (a handle still held elsewhere), no such pid, another user's", () => {
    const fake = fakeKernel32(table());
    expect(windowsPidAlive(4242, fake.k)).toBe(true);
    expect(windowsPidAlive(77, fake.k)).toBe(false);
    expect(windowsPidAlive(31337, fake.k)).toBe(false);
    expect(windowsPidAlive(8, fake.k)).toBe(true);
    expect(fake.openHandles()).toBe(0);
  });

  test("cannot be told without a binding, or when OpenProcess fails for another reason", () => {
    expect(windowsPidAlive(4242, null)).toBeNull();
    const odd = fakeKernel32(table());
    const k = { ...odd.k, OpenProcess: () => null, GetLastError: () => 6 }; // ERROR_INVALID_HANDLE
    expect(windowsPidAlive(4242, k)).toBeNull();
  });
});
