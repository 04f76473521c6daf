import { describe, expect, test } from "bun:test";
import { closeSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A model file's header is the file's word (a hub repo, a shared models folder): one array of
// millions of empty strings (a sparse file of zeros) was stepped over on the loop in one
// stretch, ~1.8 s for the 16 Mi entries the reader allows, and `models`, `plan` or a chat's
// load held ping and cancel that long for each such file (docs/plan.md).

/** A GGUF of one key, an array of `count` strings, each of length 0 (the zeros after the header). */
function emptyStrings(path: string, count: number): void {
  const head: number[] = [...new TextEncoder().encode("GGUF")];
  const u32 = (n: number) => head.push(n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
  const u64 = (n: number) => {
    u32(n % 2 ** 32);
    u32(Math.floor(n / 2 ** 32));
  };
  u32(3); // version
  u64(0); // tensors
  u64(1); // keys
  u64(1);
  head.push("k".charCodeAt(0));
  u32(9); // an array
  u32(8); // of strings
  u64(count);
  const fd = openSync(path, "w");
  try {
    writeSync(fd, new Uint8Array(head));
    ftruncateSync(fd, head.length + count * 8 + 64);
  } finally {
    closeSync(fd);
  }
}

/**
 * A GGUF of one key, an array of `outer` arrays of `inner` strings of length 0 each: no one
 * array is long, the entries stepped over in all are.
 */
function nestedEmptyStrings(path: string, outer: number, inner: number): void {
  const head = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 4 + 8;
  const entry = 4 + 8 + inner * 8;
  const bytes = new Uint8Array(head + outer * entry + 64);
  const view = new DataView(bytes.buffer);
  bytes.set(new TextEncoder().encode("GGUF"), 0);
  view.setUint32(4, 3, true); // version; 0 tensors
  view.setUint32(16, 1, true); // keys
  view.setUint32(24, 1, true); // the key's name: "k"
  bytes[32] = "k".charCodeAt(0);
  view.setUint32(33, 9, true); // an array
  view.setUint32(37, 9, true); // of arrays
  view.setUint32(41, outer, true);
  for (let i = 0; i < outer; i++) {
    const at = head + i * entry;
    view.setUint32(at, 8, true); // each of strings
    view.setUint32(at + 4, inner, true);
  }
  const fd = openSync(path, "w");
  try {
    writeSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

describe("a GGUF header's big arrays", () => {
  test("nested, each short, are stepped over with turns of the loop as one long one", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "nested.gguf");
    // 1 Mi entries in all, as below, in arrays of 1,024: none long enough to pause by itself.
    nestedEmptyStrings(path, 1 << 10, 1 << 10);
    const { value, turns } = await turnsDuring(() =>
      readGgufHeader(path).then(
        (h) => h.metadata.k,
        (err: Error) => err.message,
      ),
    );
    expect(value).toEqual({ array_length: 1 << 10 });
    expect(turns).toBeGreaterThanOrEqual((1 << 20) / (1 << 17));
  });

  test("are stepped over with turns of the loop between pieces", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "many.gguf");
    const count = 1 << 20;
    emptyStrings(path, count);
    const { value, turns } = await turnsDuring(() =>
      readGgufHeader(path).then(
        (h) => h.metadata.k,
        (err: Error) => err.message,
      ),
    );
    // Read whole, the header's one key counted (a model it is not: the planner says so later).
    expect(value).toEqual({ array_length: count });
    // A turn at least every 128 Ki entries; the old stretch gave the stat's few, whatever the count.
    expect(turns).toBeGreaterThanOrEqual(count / (1 << 17));
  });
});
