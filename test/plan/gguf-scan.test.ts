import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gguf } from "@huggingface/gguf";
import { headerOfParsed, readGgufHeader } from "../../src/plan/gguf-read.ts";
import { GgufInvalid, GgufTruncated, scanGguf } from "../../src/plan/gguf-scan.ts";
import {
  deepseek2,
  encodeGguf,
  type GgufSpec,
  gemma3,
  llama7b,
  mixtral8x7b,
  writeGguf,
} from "../fixtures/gguf-writer.ts";
import { REAL_MODELS_DIR, realModelsSkip } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * The planner's own header scanner (gguf-scan.ts) must see exactly what @huggingface/gguf sees,
 * big arrays reduced to their length: the library is the reference for every file here.
 */
async function byLibrary(path: string, size: number) {
  return headerOfParsed(await gguf(path, { allowLocalFile: true }), path, size).header;
}

async function expectSame(path: string): Promise<void> {
  const ours = await readGgufHeader(path);
  const theirs = await byLibrary(path, ours.size_bytes);
  expect(ours).toEqual(theirs);
}

/** A vocabulary of `n` tokens with scores and types, as llama.cpp's converters write one. */
function withVocab(spec: GgufSpec, n: number): GgufSpec {
  const tokens = Array.from({ length: n }, (_, i) => `tok${i}▁${"x".repeat(i % 7)}`);
  return {
    ...spec,
    metadata: {
      ...spec.metadata,
      "tokenizer.ggml.model": "llama",
      "tokenizer.ggml.tokens": { type: "arr_str", value: tokens },
      "tokenizer.ggml.scores": { type: "arr_f32", value: tokens.map((_, i) => -i / 2) },
      "tokenizer.ggml.token_type": { type: "arr_i32", value: tokens.map((_, i) => (i < 3 ? 3 : 1)) },
      "tokenizer.ggml.merges": { type: "arr_str", value: [] },
      "test.small_f32": { type: "arr_f32", value: [0.5, 1.5, -2] },
      "test.flags": { type: "arr_bool", value: [true, false, true] },
      "test.at_limit": { type: "arr_i32", value: Array.from({ length: 4096 }, (_, i) => i) },
      "test.over_limit": { type: "arr_i32", value: Array.from({ length: 4097 }, (_, i) => i) },
      "test.big": { type: "u64", value: 2 ** 40 + 3 },
      "test.negative": { type: "i32", value: -7 },
    },
  };
}

describe("scanGguf against @huggingface/gguf", () => {
  const shapes: [string, () => GgufSpec][] = [
    ["llama 7B", llama7b],
    ["llama 7B, v2", () => ({ ...llama7b(), version: 2 })],
    ["mixtral 8x7B", mixtral8x7b],
    ["gemma3 (per-layer arrays)", gemma3],
    ["deepseek2", deepseek2],
    ["llama 7B with a 40k vocabulary", () => withVocab(llama7b(), 40_000)],
  ];
  for (const [name, spec] of shapes)
    test(name, async () => {
      using dir = tmpdir();
      await expectSame(writeGguf(dir.path, "m.gguf", spec()));
    });

  test("a vocabulary is counted, not kept; small numeric arrays keep their values", async () => {
    using dir = tmpdir();
    const h = await readGgufHeader(writeGguf(dir.path, "v.gguf", withVocab(llama7b(), 5000)));
    expect(h.metadata["tokenizer.ggml.tokens"]).toEqual({ array_length: 5000 });
    expect(h.metadata["tokenizer.ggml.scores"]).toEqual({ array_length: 5000 });
    expect(h.metadata["test.at_limit"]).toHaveLength(4096);
    expect(h.metadata["test.over_limit"]).toEqual({ array_length: 4097 });
    expect(h.metadata["test.small_f32"]).toEqual([0.5, 1.5, -2]);
    expect(h.metadata["test.flags"]).toEqual({ array_length: 3 });
    expect(h.metadata["test.big"]).toBe(2 ** 40 + 3);
    expect(h.metadata["test.negative"]).toBe(-7);
  });

  /**
   * A one-tensor header as another writer wrote it: `littleEndian` false a big-endian file,
   * version 1 with 32-bit sizes.
   */
  function oddHeader(dir: string, version: number, littleEndian: boolean): string {
    const bytes: number[] = [...new TextEncoder().encode("GGUF")];
    const put = (n: number, size: 4 | 8) => {
      const b = new Uint8Array(size);
      const v = new DataView(b.buffer);
      if (size === 4) v.setUint32(0, n, littleEndian);
      else v.setBigUint64(0, BigInt(n), littleEndian);
      bytes.push(...b);
    };
    const count = (n: number) => put(n, version === 1 ? 4 : 8);
    const str = (s: string) => {
      const enc = new TextEncoder().encode(s);
      count(enc.length);
      bytes.push(...enc);
    };
    put(version, 4);
    count(1); // tensors
    count(2); // metadata entries
    str("general.architecture");
    put(8, 4);
    str("llama");
    str("llama.block_count");
    put(4, 4);
    put(1, 4);
    str("w");
    put(1, 4); // dims
    count(8);
    put(0, 4); // F32
    put(0, 8);
    const header = new Uint8Array(bytes);
    const path = join(dir, `v${version}${littleEndian ? "" : "-be"}.gguf`);
    const file = new Uint8Array(Math.ceil(header.length / 32) * 32 + 32);
    file.set(header);
    writeFileSync(path, file);
    return path;
  }

  // llama.cpp b10587's reader (gguf.cpp) refuses both: the plan had said they fit.
  test("a big-endian file or a version 1 is refused, naming the version, local or remote", async () => {
    using dir = tmpdir();
    const cases: [string, RegExp][] = [
      [oddHeader(dir.path, 3, false), /big-endian GGUF \(version 3 read byte-swapped\)/],
      [oddHeader(dir.path, 1, true), /GGUF version 1, which llama.cpp no longer reads/],
    ];
    for (const [path, message] of cases) {
      const local = await readGgufHeader(path).catch((e) => e);
      expect(local.data).toMatchObject({ problem: "not_gguf" });
      expect(local.message).toMatch(message);
      const remote = await byLibrary(path, 64).catch((e) => e);
      expect(remote).toBeInstanceOf(GgufInvalid);
      expect(remote.message).toMatch(message);
    }
  });

  // tiny-embed.gguf: a BERT encoder, the embedding model of recordings 111–119.
  const real = ["tiny-llama.gguf", "tiny-llama-q8.gguf", "tiny-llama-spmprefix.gguf", "tiny-embed.gguf"].map(
    (f) => join(REAL_MODELS_DIR, f),
  );
  if (real.every((p) => existsSync(p))) {
    test("llama.cpp's own tiny GGUFs (an opt-in real-file check)", async () => {
      for (const path of real) await expectSame(path);
    });
  } else test.skip(realModelsSkip("the scanner against llama.cpp's own GGUFs"), () => {});
});

describe("scanGguf on bad bytes", () => {
  const over = (bytes: Uint8Array) => (position: number, length: number) =>
    bytes.subarray(position, Math.min(bytes.length, position + length));

  test("a header cut anywhere is truncated, never a crash or a hang", () => {
    const { header } = encodeGguf(withVocab(llama7b(), 300));
    for (const cut of [5, 12, 30, 200, header.length >> 1, header.length - 9]) {
      expect(() => scanGguf(over(header.subarray(0, cut)), 64)).toThrow(GgufTruncated);
    }
    // Whole, it reads (the cursor's window is smaller than the header and than the vocabulary).
    expect(scanGguf(over(header), 64).tensorInfos.length).toBeGreaterThan(0);
  });

  test("a key or a tensor name given twice is invalid, as llama.cpp's reader refuses the file", () => {
    const spec = llama7b();
    spec.metadata["zz.twice.a"] = 32;
    spec.metadata["zz.twice.b"] = 4096;
    const { header } = encodeGguf(spec);
    /** The header with the one occurrence of `from` written as `to` (of the same length). */
    const patched = (from: string, to: string) => {
      const text = new TextDecoder("latin1").decode(header);
      const at = text.indexOf(from);
      expect(text.indexOf(from, at + 1)).toBe(-1);
      const copy = header.slice();
      copy.set(new TextEncoder().encode(to), at);
      return copy;
    };
    // The planner read the last of two block counts; llama-server refuses the file at load.
    expect(() => scanGguf(over(patched("zz.twice.b", "zz.twice.a")))).toThrow(
      /the key "zz.twice.a" is given twice/,
    );
    expect(() => scanGguf(over(patched("blk.0.attn_k.weight", "blk.0.attn_q.weight")))).toThrow(
      /the tensor "blk.0.attn_q.weight" is given twice/,
    );
    expect(() => scanGguf(over(header))).not.toThrow();
  });

  // JSON.stringify left a name's bidi overrides and C1 controls raw in the message the host shows.
  test("a name quoted in the error has its bidi overrides and C1 controls escaped", () => {
    const spec = llama7b();
    spec.metadata["zz\u202e\u0085.1"] = 32;
    spec.metadata["zz\u202e\u0085.2"] = 4096;
    const { header } = encodeGguf(spec);
    const second = new TextEncoder().encode("zz\u202e\u0085.2");
    const at = Buffer.from(header).indexOf(Buffer.from(second));
    expect(at).toBeGreaterThan(0);
    const copy = header.slice();
    copy[at + second.length - 1] = "1".charCodeAt(0);
    let message = "";
    try {
      scanGguf(over(copy));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('the key "zz\\u{202e}\\u{85}.1" is given twice');
    expect(message).not.toContain("\u202e");
  });

  test("an unknown value type, a wild version or count is invalid", () => {
    const { header } = encodeGguf(llama7b());
    const wrong = (at: number, value: number) => {
      const copy = header.slice();
      new DataView(copy.buffer).setUint32(at, value, true);
      return copy;
    };
    expect(() => scanGguf(over(wrong(4, 9)))).toThrow(
      /GGUF version 9, where llama.cpp reads versions 2 and 3/,
    );
    expect(() => scanGguf(over(wrong(4, 4)))).toThrow(/GGUF version 4,/);
    expect(() => scanGguf(over(wrong(4, 0)))).toThrow(/GGUF version 0,/);
    expect(() => scanGguf(over(wrong(8, 0xffffffff)))).toThrow(GgufInvalid);
    // The first metadata entry's type follows its key: "GGUF", version, two counts, key.
    const keyLen = new DataView(header.buffer).getUint32(24, true);
    expect(() => scanGguf(over(wrong(32 + keyLen, 13)))).toThrow(/value type 13/);
    // One metadata entry: an array of arrays of arrays… 10 000 deep: refused, not a stack overflow.
    const deep: number[] = [...new TextEncoder().encode("GGUF")];
    const u32 = (n: number) => deep.push(n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
    const u64 = (n: number) => {
      u32(n);
      u32(0);
    };
    u32(3);
    u64(0);
    u64(1);
    u64(1);
    deep.push("k".charCodeAt(0));
    u32(9); // the entry is an array
    for (let i = 0; i < 10_000; i++) {
      u32(9); // of arrays
      u64(1); // of one
    }
    u32(4);
    u64(0);
    expect(() => scanGguf(over(new Uint8Array(deep)))).toThrow(/nested more than 8 deep/);
  });
});

describe("scanGguf keeps little of a header that lies about its sizes", () => {
  /** A v3 header's bytes, written little-endian. */
  class Bytes {
    out: number[] = [...new TextEncoder().encode("GGUF")];
    u32(n: number) {
      this.out.push(n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
      return this;
    }
    u64(n: number) {
      return this.u32(n % 2 ** 32).u32(Math.floor(n / 2 ** 32));
    }
    str(s: string) {
      const enc = new TextEncoder().encode(s);
      this.u64(enc.length);
      this.out.push(...enc);
      return this;
    }
  }
  /**
   * A file of `size` bytes (a sparse one costs no disk) that starts with `head`, zeros after:
   * it refuses a read of more than 64 MiB at once, which the reader had allocated whole.
   */
  const sparse = (head: Uint8Array, size: number) => (position: number, length: number) => {
    const want = Math.max(0, Math.min(length, size - position));
    if (want > 64 << 20) throw new Error(`asked for ${want} bytes at once`);
    const out = new Uint8Array(want);
    if (position < head.length) out.set(head.subarray(position, position + want));
    return out;
  };

  test("a string value of 8 GiB is stepped over, not read into memory", () => {
    const b = new Bytes().u32(3).u64(0).u64(2).str("general.architecture").u32(8).str("llama");
    b.str("tokenizer.chat_template")
      .u32(8)
      .u64(2 ** 33);
    const head = new Uint8Array(b.out);
    const scanned = scanGguf(sparse(head, head.length + 2 ** 33 + 4096));
    expect(scanned.metadata["general.architecture"]).toBe("llama");
    expect(scanned.metadata["tokenizer.chat_template"]).toBeUndefined();
  });

  test("a key's or a tensor's name of 8 GiB is invalid, not read into memory", () => {
    // Tensor and key counts of 0 and 1, either way round: the first name read says 8 GiB.
    for (const [tensors, keys] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const head = new Bytes()
        .u32(3)
        .u64(tensors)
        .u64(keys)
        .u64(2 ** 33);
      expect(() => scanGguf(sparse(new Uint8Array(head.out), 2 ** 40))).toThrow(/a name of 8589934592 bytes/);
    }
  });

  test("numeric arrays kept stop at a budget: 600 keys of 4096 doubles are mostly counted", () => {
    const b = new Bytes().u32(3).u64(0).u64(600);
    for (let i = 0; i < 600; i++) {
      b.str(`test.a${i}`).u32(9).u32(12).u64(4096);
      for (let j = 0; j < 4096; j++) b.u64(0);
    }
    const head = new Uint8Array(b.out);
    const scanned = scanGguf(sparse(head, head.length));
    let kept = 0;
    for (const v of Object.values(scanned.metadata)) if (Array.isArray(v)) kept += v.length;
    expect(kept * 8).toBeLessThanOrEqual(16 << 20);
    expect(scanned.metadata["test.a0"]).toHaveLength(4096);
    expect(scanned.metadata["test.a599"]).toEqual({ array_length: 4096 });
  });
});

test("a general.alignment that is not a power of two, or not a u32, is invalid, as llama.cpp refuses the file", async () => {
  using dir = tmpdir();
  const { header } = encodeGguf(llama7b());
  // The writer's first entry is general.alignment (u32): "GGUF", version, two counts, key, type.
  const at = 24 + 8 + "general.alignment".length + 4;
  for (const [alignment, valid] of [
    [48, false],
    [3, false],
    [0, false],
    [64, true],
  ] as const) {
    const copy = header.slice();
    new DataView(copy.buffer).setUint32(at, alignment, true);
    const file = new Uint8Array(1 << 20);
    file.set(copy);
    const path = join(dir.path, `a${alignment}.gguf`);
    writeFileSync(path, file);
    const local = () => scanGguf((p, n) => file.subarray(p, p + n));
    if (valid) expect(local().tensorDataOffset % alignment).toBe(0);
    else expect(local).toThrow(/general.alignment must be a power of two/);
    // A hub's header is read by the library, which takes any positive alignment (0 it refuses).
    if (alignment === 0) continue;
    const parsed = await gguf(path, { allowLocalFile: true });
    const remote = () => headerOfParsed(parsed, path, file.length);
    if (valid) expect(remote).not.toThrow();
    else expect(remote).toThrow(/general.alignment must be a power of two/);
  }
  // An i32 of 32: llama.cpp reads the key as a u32 only, and aborts (GGML_ASSERT) on another type.
  const signed = header.slice();
  new DataView(signed.buffer).setUint32(at - 4, 5, true);
  expect(() => scanGguf((p, n) => signed.subarray(p, p + n))).toThrow(/general.alignment is of type 5/);
});

test("an array of more strings than any vocabulary is invalid, not minutes of the loop stepping over zeros", () => {
  // One key: an array of 2^40 strings, in a file of zeros after it (a sparse file costs no disk):
  // each zero is a string of length 0, so the scan stepped over the file's every 8 bytes.
  const head: number[] = [...new TextEncoder().encode("GGUF")];
  const u32 = (n: number) => head.push(n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
  const u64 = (n: number) => {
    u32(n % 2 ** 32);
    u32(Math.floor(n / 2 ** 32));
  };
  u32(3);
  u64(0);
  u64(1);
  u64(1);
  head.push("k".charCodeAt(0));
  u32(9); // an array
  u32(8); // of strings
  u64(2 ** 40);
  const bytes = new Uint8Array(head);
  const size = 2 ** 28;
  const zeros = (position: number, length: number) => {
    const out = new Uint8Array(Math.max(0, Math.min(length, size - position)));
    if (position < bytes.length) out.set(bytes.subarray(position, position + out.length));
    return out;
  };
  expect(() => scanGguf(zeros)).toThrow(/more entries than any vocabulary/);
  // The arrays of strings of a real one (262k tokens and their merges) read as they did.
  const { header } = encodeGguf(withVocab(llama7b(), 40_000));
  expect(() => scanGguf((p, n) => header.subarray(p, p + n))).not.toThrow();
});
