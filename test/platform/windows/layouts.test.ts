import { describe, expect, test } from "bun:test";
import {
  fileTime,
  physicalMemory,
  processorCores,
  sizedStruct,
  utf16,
  workingSetBytes,
} from "../../../src/platform/windows/layouts.ts";
import { coreRecords } from "./fake-kernel32.ts";

function struct(size: number, fill: (v: DataView) => void): Uint8Array {
  const buf = sizedStruct(size);
  fill(new DataView(buf.buffer));
  return buf;
}

describe("PROCESS_MEMORY_COUNTERS", () => {
  test("the working set is the SIZE_T after PeakWorkingSetSize, not the peak", () => {
    const buf = struct(72, (v) => {
      v.setBigUint64(8, 999_999_999n, true);
      v.setBigUint64(16, 123_456_789n, true);
    });
    expect(workingSetBytes(buf)).toBe(123_456_789);
  });

  test("a short buffer or a zero working set is no reading", () => {
    expect(workingSetBytes(new Uint8Array(40))).toBeNull();
    expect(workingSetBytes(sizedStruct(72))).toBeNull();
  });
});

describe("MEMORYSTATUSEX", () => {
  test("total and available physical memory, after dwLength and dwMemoryLoad", () => {
    const buf = struct(64, (v) => {
      v.setUint32(4, 37, true);
      v.setBigUint64(8, 34_359_738_368n, true);
      v.setBigUint64(16, 21_474_836_480n, true);
      v.setBigUint64(24, 1n, true); // ullTotalPageFile: not physical memory
    });
    expect(physicalMemory(buf)).toEqual({ total_bytes: 34_359_738_368, available_bytes: 21_474_836_480 });
  });

  test("no total, more available than total, or a short buffer is no reading", () => {
    expect(physicalMemory(sizedStruct(64))).toBeNull();
    const odd = struct(64, (v) => {
      v.setBigUint64(8, 10n, true);
      v.setBigUint64(16, 11n, true);
    });
    expect(physicalMemory(odd)).toBeNull();
    expect(physicalMemory(new Uint8Array(16))).toBeNull();
  });
});

describe("processor core records", () => {
  test("one record per physical core; the threads are the bits of its masks", () => {
    const smt = coreRecords([[0b11n], [0b1100n], [0b110000n], [0b11000000n]]);
    expect(processorCores(smt, smt.length)).toEqual({ cores: 4, logical: 8 });
    const plain = coreRecords([[1n], [2n], [4n]]);
    expect(processorCores(plain, plain.length)).toEqual({ cores: 3, logical: 3 });
  });

  test("records are walked by their own size, and cores in a second group count", () => {
    const grown = coreRecords([[0b11n], [0b1100n]], 24);
    expect(processorCores(grown, grown.length)).toEqual({ cores: 2, logical: 4 });
    const groups = coreRecords([[1n], [1n << 63n]]);
    expect(processorCores(groups, groups.length)).toEqual({ cores: 2, logical: 2 });
  });

  test("other relationships in the buffer are skipped", () => {
    const cores = coreRecords([[1n], [2n]]);
    const cache = new Uint8Array(48);
    new DataView(cache.buffer).setUint32(0, 2, true); // RelationCache
    new DataView(cache.buffer).setUint32(4, 48, true);
    const mixed = new Uint8Array([...cache, ...cores]);
    expect(processorCores(mixed, mixed.length)).toEqual({ cores: 2, logical: 2 });
  });

  test("only the bytes the call wrote are read", () => {
    const buf = new Uint8Array(4096);
    const two = coreRecords([[1n], [2n]]);
    buf.set(two);
    expect(processorCores(buf, two.length)).toEqual({ cores: 2, logical: 2 });
  });

  test("a record size of zero, one past the end, or a length past the buffer is untrusted", () => {
    const zero = coreRecords([[1n]]);
    new DataView(zero.buffer).setUint32(4, 0, true);
    expect(processorCores(zero, zero.length)).toBeNull();
    const long = coreRecords([[1n]]);
    new DataView(long.buffer).setUint32(4, long.length + 8, true);
    expect(processorCores(long, long.length)).toBeNull();
    expect(processorCores(coreRecords([[1n]]), 4096)).toBeNull();
    expect(processorCores(new Uint8Array(0), 0)).toBeNull();
  });
});

describe("FILETIME and UTF-16 paths", () => {
  test("a creation time keeps every 100 ns tick, as a decimal string", () => {
    const buf = new Uint8Array(8);
    new DataView(buf.buffer).setBigUint64(0, 134_406_334_879_770_781n, true);
    expect(fileTime(buf)).toBe("134406334879770781");
    expect(fileTime(new Uint8Array(8))).toBeNull();
    expect(fileTime(new Uint8Array(4))).toBeNull();
  });

  test("a path with a space and a non-ASCII letter decodes; a size past the buffer does not", () => {
    const path = "C:\\Users\\Zoë Doe\\AppData\\Local\\local-ai\\llama-server.exe";
    const buf = new Uint8Array(1024);
    buf.set(Buffer.from(`${path}\0junk`, "utf16le"));
    expect(utf16(buf, path.length)).toBe(path);
    expect(utf16(buf, 513)).toBeNull();
    expect(utf16(buf, 0)).toBeNull();
  });
});
