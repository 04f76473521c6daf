import { describe, expect, test } from "bun:test";
import { kernel32 } from "../../../src/platform/windows/kernel32.ts";
import { windowsPhysicalMemory, windowsProcessorCores } from "../../../src/platform/windows/system.ts";
import { coreRecords, fakeKernel32 } from "./fake-kernel32.ts";

describe("physical cores", () => {
  test("asks for the size first, then reads one record per core", () => {
    const cores = coreRecords([[0b11n], [0b1100n], [0b110000n], [0b11000000n], [1n << 8n], [1n << 9n]]);
    expect(windowsProcessorCores(fakeKernel32({}, { cores }).k)).toEqual({ cores: 6, logical: 10 });
  });

  test("a failing call or no binding is no reading", () => {
    const cores = coreRecords([[1n]]);
    const failing = fakeKernel32({}, { cores, fail: new Set(["GetLogicalProcessorInformationEx"]) });
    expect(windowsProcessorCores(failing.k)).toBeNull();
    expect(windowsProcessorCores(fakeKernel32({}).k)).toBeNull();
    expect(windowsProcessorCores(null)).toBeNull();
  });

  test("a buffer that grew between the calls is asked for again", () => {
    const small = coreRecords([[1n]]);
    const big = coreRecords([[1n], [2n], [4n]]);
    let asked = 0;
    const { k } = fakeKernel32({}, { cores: big });
    const growing = {
      ...k,
      GetLogicalProcessorInformationEx: (
        rel: number,
        buf: Uint8Array | Uint32Array | null,
        len: Uint32Array,
      ) => {
        if (asked++ === 0) {
          len[0] = small.length; // what the sizing call said, before a core came online
          return 0;
        }
        return k.GetLogicalProcessorInformationEx(rel, buf, len);
      },
    };
    expect(windowsProcessorCores(growing)).toEqual({ cores: 3, logical: 3 });
  });
});

describe("physical memory", () => {
  test("total and available from GlobalMemoryStatusEx (dwLength set before the call)", () => {
    const { k } = fakeKernel32({}, { total: 16n * 2n ** 30n, available: 9n * 2n ** 30n });
    expect(windowsPhysicalMemory(k)).toEqual({ total_bytes: 16 * 2 ** 30, available_bytes: 9 * 2 ** 30 });
  });

  test("a failing call or no binding is no reading", () => {
    const failing = fakeKernel32({}, { total: 1n, available: 1n, fail: new Set(["GlobalMemoryStatusEx"]) });
    expect(windowsPhysicalMemory(failing.k)).toBeNull();
    expect(windowsPhysicalMemory(null)).toBeNull();
  });
});

test.skipIf(process.platform === "win32")("the binding is not loaded off Windows", () => {
  expect(kernel32()).toBeNull();
});
