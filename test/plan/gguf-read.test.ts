import { describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gguf } from "@huggingface/gguf";
import { headerOfParsed, readGgufHeader, shardPaths } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import {
  deepseek2,
  denseModel,
  encodeGguf,
  type FixtureTensor,
  type GgufValue,
  gemma3,
  llama7b,
  mixtral8x7b,
  writeGguf,
} from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

type Metadata = Record<string, GgufValue>;

async function problemOf(path: string): Promise<{ code: string; problem: unknown; message: string }> {
  try {
    await readGgufHeader(path);
  } catch (err) {
    if (err instanceof CoreError) return { code: err.code, problem: err.data?.problem, message: err.message };
    throw err;
  }
  throw new Error("expected a model_missing error");
}

describe("readGgufHeader", () => {
  test("a tensor name or key quoted in the problem is cut between characters, never inside an emoji", async () => {
    using dir = tmpdir();
    const base = llama7b({ layers: 2 });
    // The 80th character is the first half of an emoji: a cut there made the error a line with a
    // lone surrogate, which a strict JSON parser on the host refuses.
    const name = `blk.5000.${"a".repeat(70)}\u{1F600}.weight`;
    const path = writeGguf(dir.path, "emoji.gguf", {
      ...base,
      tensors: [...base.tensors, { name, shape: [32, 32], type: 0 }],
    });
    const p = await problemOf(path);
    expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
    expect(p.message.isWellFormed()).toBe(true);
    const key = `${"k".repeat(200)}\u{1F600}.block_count`;
    const keyed = writeGguf(dir.path, "key.gguf", {
      ...base,
      metadata: { ...base.metadata, [key]: { type: "u64", value: 30_000_000 } },
    });
    const k = await problemOf(keyed);
    expect(k.message.isWellFormed()).toBe(true);
    expect(k.message.length).toBeLessThan(400);
  });

  test("layers no model has are not a GGUF: a huge block_count, a blk.N past the bound, a million tensors", async () => {
    using dir = tmpdir();
    const base = llama7b({ layers: 2 });
    const huge = writeGguf(dir.path, "huge.gguf", {
      ...base,
      metadata: { ...base.metadata, "llama.block_count": { type: "u64", value: 30_000_000 } },
    });
    const named = writeGguf(dir.path, "named.gguf", {
      ...base,
      metadata: Object.fromEntries(Object.entries(base.metadata).filter(([k]) => k !== "llama.block_count")),
      tensors: [...base.tensors, { name: "blk.4000000000.attn_q.weight", shape: [32, 32], type: 0 }],
    });
    for (const path of [huge, named]) {
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain("4096 layers");
    }
    // As an array, whose largest entry the planner takes: [NaN] made the plan NaN, and 10
    // million layers held the loop some 10 s.
    for (const [i, value] of [[2, Number.NaN], [2, 10_000_000], [-5]].entries()) {
      const path = writeGguf(dir.path, `array${i}.gguf`, {
        ...base,
        metadata: { ...base.metadata, "llama.block_count": { type: "arr_f32", value } },
      });
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain("llama.block_count is ");
    }
    // A tensor count past the bound, in a header that says so and nothing else.
    const many = join(dir.path, "many.gguf");
    const head = Buffer.alloc(24);
    head.write("GGUF", 0, "latin1");
    head.writeUInt32LE(3, 4);
    head.writeBigUInt64LE(70_000n, 8);
    head.writeBigUInt64LE(0n, 16);
    writeFileSync(many, Buffer.concat([head, Buffer.alloc(4096)]));
    expect(await problemOf(many)).toMatchObject({ code: "model_missing", problem: "not_gguf" });
  });

  test("a shape count that is NaN, infinite, negative or past 32 bits is not a GGUF: its plan's bytes were NaN, which fit anywhere", async () => {
    using dir = tmpdir();
    const cases: [string, GgufValue, string][] = [
      ["llama.embedding_length", { type: "f32", value: Number.NaN }, "NaN"],
      ["llama.feed_forward_length", { type: "f32", value: Number.POSITIVE_INFINITY }, "Infinity"],
      ["llama.attention.head_count_kv", { type: "i32", value: -1 }, "-1"],
      ["llama.attention.head_count", { type: "arr_f32", value: [32, Number.NaN] }, "NaN"],
      // llama.cpp reads them as 32-bit unsigned: a larger one made the plan Infinity.
      ["llama.context_length", { type: "f32", value: 2 ** 40 }, "1099511627776"],
      ["llama.vocab_size", { type: "u64", value: 2 ** 32 }, "4294967296"],
    ];
    for (const [i, [key, value, shown]] of cases.entries()) {
      const base = llama7b({ layers: 2 });
      const path = writeGguf(dir.path, `bad${i}.gguf`, {
        ...base,
        metadata: { ...base.metadata, [key]: value },
      });
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain(`${key} is ${shown}, not a count a model can have`);
    }
    // Per-layer arrays of counts are read as they are.
    const base = llama7b({ layers: 2 });
    const perLayer = writeGguf(dir.path, "per-layer.gguf", {
      ...base,
      metadata: { ...base.metadata, "llama.attention.head_count_kv": { type: "arr_i32", value: [32, 8] } },
    });
    expect(modelInfo(await readGgufHeader(perLayer)).n_layer).toBe(2);
  });

  test("a tensor of more elements than any file holds is not a GGUF, not a truncated download", async () => {
    using dir = tmpdir();
    const base = llama7b({ layers: 2 });
    // Each dimension under 2^53, their product past it (Infinity for the last): a file no disk
    // holds, which was called an interrupted download, to be fetched again to the same end.
    for (const [i, shape] of [
      [2 ** 30, 2 ** 30, 2 ** 30],
      [2 ** 52, 2 ** 52, 2 ** 52, 2 ** 52, 2 ** 52, 2 ** 52, 2 ** 52],
    ].entries()) {
      const { header } = encodeGguf({
        ...base,
        tensors: [...base.tensors, { name: "huge.weight", shape, type: 0 }],
      });
      const path = join(dir.path, `elements${i}.gguf`);
      writeFileSync(path, header);
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain('the tensor "huge.weight" has');
      expect(p.message).toContain(path);
    }
  });

  test("a tensor table llama.cpp's reader refuses is not a GGUF: a long name, 5 dimensions, data out of place", async () => {
    using dir = tmpdir();
    const base = llama7b({ layers: 2 });
    const cases: [string, FixtureTensor, string][] = [
      ["name", { name: `blk.0.${"x".repeat(58)}`, shape: [32], type: 0 }, "name is 64 bytes"],
      ["dims", { name: "five.weight", shape: [32, 1, 1, 1, 2], type: 0 }, "has 5 dimensions"],
    ];
    for (const [file, tensor, says] of cases) {
      const path = writeGguf(dir.path, `${file}.gguf`, { ...base, tensors: [...base.tensors, tensor] });
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain(`the tensor "${tensor.name}"`);
      expect(p.message).toContain(says);
    }
    // The second tensor's data said to start where the first's does (llama.cpp: "has offset 0, expected …").
    // The header alone: the table is judged before the file's length is.
    const bytes = Buffer.from(encodeGguf(base).header);
    const second = base.tensors[1]!;
    const at = bytes.indexOf(Buffer.from(second.name)) + second.name.length + 4 + 8 * second.shape.length + 4;
    bytes.writeBigUInt64LE(0n, at);
    const path = join(dir.path, "offset.gguf");
    writeFileSync(path, bytes);
    const p = await problemOf(path);
    expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
    expect(p.message).toContain(`the tensor "${second.name}" has its data at byte 0 of the data`);
  });

  // A name was quoted with its bidi overrides and C1 controls raw (JSON.stringify keeps them, the
  // bare quote kept all): the message the host shows had its text reordered.
  test("a name quoted in a not-a-GGUF message has its bidi overrides and controls escaped", async () => {
    using dir = tmpdir();
    const base = llama7b({ layers: 2 });
    const tensor = { name: "five\u202e\u0085.weight", shape: [32, 1, 1, 1, 2], type: 0 };
    const five = writeGguf(dir.path, "five.gguf", { ...base, tensors: [...base.tensors, tensor] });
    const p = await problemOf(five);
    expect(p.message).toContain('the tensor "five\\u{202e}\\u{85}.weight" has 5 dimensions');
    const arch = writeGguf(dir.path, "arch.gguf", {
      metadata: { "general.architecture": `\u202e\u001b[2J${"x".repeat(200)}` },
      tensors: [{ name: "blk.0.attn_norm.weight", shape: [64], type: 0 }],
    });
    const q = await problemOf(arch);
    expect(q.message).toContain("(\\u{202e}\\u{1b}[2Jxxx");
    for (const m of [p.message, q.message]) for (const c of "\u202e\u0085\u001b") expect(m).not.toContain(c);
  });

  test("a tensor of a type llama.cpp added lately (NVFP4, Q1_0, Q2_0) is sized as ggml sizes it, not as F32", async () => {
    using dir = tmpdir();
    // ggml's type traits (ggml-common.h): NVFP4 64 elements in 36 bytes, Q1_0 128 in 18, Q2_0 64 in 18.
    // Each file is as long as llama.cpp writes it; counted as F32, it was "truncated: download it again".
    const cases: [number, number, number][] = [
      [40, 64, 36],
      [41, 128, 18],
      [42, 64, 18],
    ];
    for (const [type, block, blockBytes] of cases) {
      const rows = 1024;
      const spec = {
        metadata: llama7b({ layers: 2 }).metadata,
        tensors: [{ name: "w.weight", shape: [block, rows], type }],
      };
      const path = join(dir.path, `type${type}.gguf`);
      writeFileSync(path, encodeGguf(spec).header);
      truncateSync(path, encodeGguf(spec).header.length + rows * blockBytes);
      const header = await readGgufHeader(path);
      expect(header.tensors[0]!.bytes).toBe(rows * blockBytes);
    }
  });

  test("a tensor of a type id llama.cpp does not have is not a GGUF, the type named, local or remote", async () => {
    using dir = tmpdir();
    // gguf.cpp refuses an id past GGML_TYPE_COUNT (43) or one whose block is 0 (4 and 5, Q4_2
    // and Q4_3; 31–33 and 36–38, repacked types never in files). Sized as F32, it was planned.
    const w = { name: "w.weight", shape: [256, 4], type: 0 };
    const spec = { metadata: llama7b({ layers: 2 }).metadata, tensors: [w] };
    for (const type of [4, 31, 38, 43, 0x80000000]) {
      const bytes = Buffer.from(encodeGguf(spec).header);
      bytes.writeUInt32LE(type, bytes.indexOf(Buffer.from(w.name)) + w.name.length + 4 + 8 * w.shape.length);
      const path = join(dir.path, `type${type}.gguf`);
      writeFileSync(path, bytes);
      truncateSync(path, bytes.length + 4096);
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain(
        `the tensor "w.weight" is of ggml type ${type}, a type llama.cpp does not have`,
      );
      const parsed = await gguf(path, { allowLocalFile: true });
      expect(() => headerOfParsed(parsed, path, bytes.length + 4096)).toThrow(`ggml type ${type},`);
    }
  });

  test("a tensor whose rows are not whole blocks of its type is not a GGUF, as llama.cpp refuses it", async () => {
    using dir = tmpdir();
    // gguf.cpp: "of type 12 (q4_K) has 1408 elements per row, not a multiple of block size (256)".
    // It was sized in whole blocks and planned; llama-quantize falls back to Q5_0 for such a row.
    const base = llama7b({ layers: 2 });
    const cases: [FixtureTensor, string][] = [
      [
        { name: "odd.weight", shape: [1408, 8], type: 12 },
        "rows of 1408 elements, not whole blocks of 256 (Q4_K)",
      ],
      [{ name: "odd.weight", shape: [48, 2], type: 8 }, "rows of 48 elements, not whole blocks of 32 (Q8_0)"],
      [{ name: "odd.weight", shape: [], type: 2 }, "rows of 1 elements, not whole blocks of 32 (Q4_0)"],
    ];
    for (const [i, [tensor, says]] of cases.entries()) {
      const path = writeGguf(dir.path, `odd${i}.gguf`, { ...base, tensors: [...base.tensors, tensor] });
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain(`the tensor "odd.weight" has ${says}`);
    }
    // Whole blocks of the fallback type read.
    const fallback = { name: "odd.weight", shape: [1408, 8], type: 6 };
    const ok = writeGguf(dir.path, "q5_0.gguf", { ...base, tensors: [...base.tensors, fallback] });
    expect((await readGgufHeader(ok)).tensors.at(-1)!.bytes).toBe((1408 / 32) * 22 * 8);
  });

  test("a Q8_1 tensor is 36 bytes a block, as ggml stores it: the one after it is where llama.cpp puts it", async () => {
    using dir = tmpdir();
    // block_q8_1 is two halves and 32 quants (ggml-common.h). At 40 a block, the next tensor's
    // offset, right for llama.cpp, was called out of place: not a GGUF.
    const q81 = { name: "q.weight", shape: [32, 32], type: 9 };
    const norm = { name: "n.weight", shape: [32], type: 0 };
    const spec = { metadata: llama7b({ layers: 2 }).metadata, tensors: [q81, norm] };
    const bytes = Buffer.from(encodeGguf(spec).header);
    const at = bytes.indexOf(Buffer.from(norm.name)) + norm.name.length + 4 + 8 * norm.shape.length + 4;
    bytes.writeBigUInt64LE(BigInt(32 * 36), at);
    const path = join(dir.path, "q8_1.gguf");
    writeFileSync(path, bytes);
    truncateSync(path, bytes.length + 32 * 36 + 32 * 4);
    const header = await readGgufHeader(path);
    expect(header.tensors.map((t) => t.bytes)).toEqual([32 * 36, 32 * 4]);
  });

  test("reads v3 and v2 headers of a 7B llama without reading tensor data", async () => {
    using dir = tmpdir();
    for (const version of [2, 3] as const) {
      const path = writeGguf(dir.path, `l${version}.gguf`, { ...llama7b(), version });
      const m = modelInfo(await readGgufHeader(path));
      expect(m.gguf_version).toBe(version);
      expect(m.architecture).toBe("llama");
      expect(m.known_architecture).toBe(true);
      expect(m.n_layer).toBe(32);
      expect(m.layers[0]!.k_per_token).toBe(4096);
      expect(m.file_type).toBe("Q4_K");
      // ~6.7B parameters at 4.5 bits: between 3.5 and 4 GiB.
      expect(m.weights_bytes / 2 ** 30).toBeGreaterThan(3.5);
      expect(m.weights_bytes / 2 ** 30).toBeLessThan(4);
    }
  });

  test("MoE expert tensors count in the layer weights", async () => {
    using dir = tmpdir();
    const m = modelInfo(await readGgufHeader(writeGguf(dir.path, "moe.gguf", mixtral8x7b())));
    expect(m.experts).toEqual({ count: 8, used: 2, ff: 14336 });
    expect(m.weights_bytes / 2 ** 30).toBeGreaterThan(24);
    expect(m.layers[0]!.k_per_token).toBe(8 * 128);
  });

  test("gemma3 marks 5 of 6 layers sliding-window; deepseek2 uses MLA sizes", async () => {
    using dir = tmpdir();
    const g = modelInfo(await readGgufHeader(writeGguf(dir.path, "g.gguf", gemma3())));
    expect(g.sliding_window).toBe(1024);
    expect(g.layers.filter((l) => l.swa).length).toBe(40);
    expect(g.layers[5]!.swa).toBe(false);
    expect(g.output_tied).toBe(true);
    const d = modelInfo(await readGgufHeader(writeGguf(dir.path, "d.gguf", deepseek2())));
    expect(d.mla).toEqual({ kv_lora_rank: 512, rope_dim: 64 });
    expect(d.layers[0]!.k_per_token).toBe(576);
    expect(d.layers[0]!.v_per_token).toBe(512);
  });

  test("an architecture name no architecture has (a megabyte long) is not a GGUF, not seconds of the loop", async () => {
    using dir = tmpdir();
    // Every per-layer lookup built and hashed a key of its length: 1 MB and 4096 layers (one
    // blk.4095 tensor) held the loop 1.4 s, and the plan report carried it three times.
    const long = "x".repeat(1_000_000);
    const path = writeGguf(dir.path, "a.gguf", {
      metadata: { "general.architecture": long },
      tensors: [{ name: "blk.4095.attn_norm.weight", shape: [64], type: 0 }],
    });
    const p = await problemOf(path);
    expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
    expect(p.message).toContain("general.architecture is 1000000 characters long");
    expect(p.message.length).toBeLessThan(500);
    // One of a name's length still reads.
    const spec = llama7b();
    spec.metadata["general.architecture"] = "a".repeat(64);
    expect(modelInfo(await readGgufHeader(writeGguf(dir.path, "b.gguf", spec))).architecture).toHaveLength(
      64,
    );
  });

  test("an unknown architecture is read best-effort with a warning", async () => {
    using dir = tmpdir();
    const spec = denseModel({
      arch: "frobnicator",
      layers: 4,
      embd: 256,
      heads: 4,
      kvHeads: 2,
      ff: 512,
      vocab: 1000,
      ctx: 2048,
      type: 1,
    });
    const m = modelInfo(await readGgufHeader(writeGguf(dir.path, "u.gguf", spec)));
    expect(m.known_architecture).toBe(false);
    expect(m.warnings.join(" ")).toContain("frobnicator");
    expect(m.layers[0]!.k_per_token).toBe(2 * 64);
  });

  test("split models are read shard by shard", async () => {
    using dir = tmpdir();
    const full = llama7b();
    const half = Math.floor(full.tensors.length / 2);
    writeGguf(dir.path, "m-00001-of-00002.gguf", {
      metadata: full.metadata,
      tensors: full.tensors.slice(0, half),
    });
    writeGguf(dir.path, "m-00002-of-00002.gguf", {
      metadata: { "split.no": 1 },
      tensors: full.tensors.slice(half),
    });
    const h = await readGgufHeader(join(dir.path, "m-00001-of-00002.gguf"));
    expect(h.files.length).toBe(2);
    expect(h.tensors.length).toBe(full.tensors.length);
    expect(modelInfo(h).n_layer).toBe(32);
    expect(shardPaths("/x/a-00002-of-00003.gguf")[0]).toBe("/x/a-00001-of-00003.gguf");
  });

  test("a shard name with no parts, part 0 or a part past its total is one file, as llama.cpp loads it", async () => {
    using dir = tmpdir();
    for (const name of ["m-00001-of-00000.gguf", "m-00000-of-00002.gguf", "m-00003-of-00002.gguf"]) {
      const path = writeGguf(dir.path, name, llama7b());
      // -00001-of-00000 made no files at all: an undefined model path, a TypeError in the plan.
      expect(shardPaths(path)).toEqual([path]);
      const h = await readGgufHeader(path);
      expect(h.path).toBe(path);
      expect(modelInfo(h).n_layer).toBe(32);
    }
  });

  test("shards that are not one model's parts are not_gguf, as llama.cpp refuses them", async () => {
    using dir = tmpdir();
    const full = llama7b();
    const half = Math.floor(full.tensors.length / 2);
    const first = {
      "split.no": { type: "u16" as const, value: 0 },
      "split.count": { type: "u16" as const, value: 2 },
    };
    const write = (
      name: string,
      firstMd: Metadata,
      second: { md: Metadata; tensors: typeof full.tensors },
    ) => {
      writeGguf(dir.path, `${name}-00001-of-00002.gguf`, {
        metadata: { ...full.metadata, ...firstMd },
        tensors: full.tensors.slice(0, half),
      });
      writeGguf(dir.path, `${name}-00002-of-00002.gguf`, { metadata: second.md, tensors: second.tensors });
      return join(dir.path, `${name}-00001-of-00002.gguf`);
    };
    const rest = full.tensors.slice(half);
    const tensorsCount = { "split.tensors.count": { type: "i32" as const, value: full.tensors.length } };
    const cases = [
      // The second part says it is the first: a copy, or another split's.
      [write("no", first, { md: { "split.no": { type: "u16", value: 0 } }, tensors: rest }), "part 1"],
      [
        write("count", first, {
          md: { "split.no": { type: "u16", value: 1 }, "split.count": { type: "u16", value: 3 } },
          tensors: rest,
        }),
        "3 parts",
      ],
      // Another model's second half: the first part counts the tensors of all of them.
      [
        write(
          "mixed",
          { ...first, ...tensorsCount },
          { md: { "split.no": { type: "u16", value: 1 } }, tensors: rest.slice(1) },
        ),
        `${full.tensors.length - 1} tensors`,
      ],
      // The first part says the split has 3 parts: the name's 2 are not all of it.
      [
        write(
          "first",
          { "split.no": { type: "u16", value: 0 }, "split.count": { type: "u16", value: 3 } },
          { md: { "split.no": { type: "u16", value: 1 } }, tensors: rest },
        ),
        "3 parts",
      ],
    ] as const;
    // A tensor in both parts (the halves of two cuts of one model): llama.cpp's loader refuses a
    // name given twice across the parts as within one.
    const twice = write("twice", first, {
      md: { "split.no": { type: "u16", value: 1 }, "split.count": { type: "u16", value: 2 } },
      tensors: full.tensors.slice(half - 1),
    });
    const dup = full.tensors[half - 1]?.name as string;
    for (const [path, says] of [...cases, [twice, `"${dup}" is in parts 1 and 2`] as const]) {
      const p = await problemOf(path);
      expect(p).toMatchObject({ code: "model_missing", problem: "not_gguf" });
      expect(p.message).toContain(says);
    }
    // Parts that agree still read.
    const good = write(
      "good",
      { ...first, ...tensorsCount },
      {
        md: { "split.no": { type: "u16", value: 1 }, "split.count": { type: "u16", value: 2 } },
        tensors: rest,
      },
    );
    expect((await readGgufHeader(good)).tensors.length).toBe(full.tensors.length);
  });

  test("a missing shard is reported absent", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m-00001-of-00002.gguf", llama7b());
    const p = await problemOf(join(dir.path, "m-00001-of-00002.gguf"));
    expect(p).toMatchObject({ code: "model_missing", problem: "absent" });
    expect(p.message).toContain("shard 2 of 2");
  });

  test("absent, directory, empty, random bytes and truncated files say which", async () => {
    using dir = tmpdir();
    expect(await problemOf(join(dir.path, "nope.gguf"))).toMatchObject({
      code: "model_missing",
      problem: "absent",
    });
    mkdirSync(join(dir.path, "d.gguf"));
    expect(await problemOf(join(dir.path, "d.gguf"))).toMatchObject({ problem: "not_gguf" });
    writeFileSync(join(dir.path, "e.gguf"), "");
    expect((await problemOf(join(dir.path, "e.gguf"))).message).toContain("empty");
    writeFileSync(join(dir.path, "r.gguf"), crypto.getRandomValues(new Uint8Array(4096)));
    expect(await problemOf(join(dir.path, "r.gguf"))).toMatchObject({ problem: "not_gguf" });
    const cut = writeGguf(dir.path, "t.gguf", { ...llama7b(), truncateBy: 1_000_000 });
    const t = await problemOf(cut);
    expect(t).toMatchObject({ code: "model_missing", problem: "truncated" });
    expect(t.message).toContain("interrupted download");
  });

  test("a loop of links or a name too long is unreadable, saying why, not an absent file to download", async () => {
    using dir = tmpdir();
    symlinkSync("b.gguf", join(dir.path, "a.gguf"));
    symlinkSync("a.gguf", join(dir.path, "b.gguf"));
    const loop = await problemOf(join(dir.path, "a.gguf"));
    expect(loop).toMatchObject({ code: "model_missing", problem: "unreadable" });
    expect(loop.message).toContain("a loop of symbolic links");
    const long = await problemOf(join(dir.path, `${"m".repeat(300)}.gguf`));
    expect(long).toMatchObject({ code: "model_missing", problem: "unreadable" });
    expect(long.message).toContain("the path is too long");
    // No file where a folder should be is still absent: nothing there to read.
    writeFileSync(join(dir.path, "f"), "");
    expect(await problemOf(join(dir.path, "f", "m.gguf"))).toMatchObject({ problem: "absent" });
  });

  test("a file cut inside its header is truncated, not a crash", async () => {
    using dir = tmpdir();
    const spec = { ...llama7b({ vocabTokens: true }) };
    const path = writeGguf(dir.path, "h.gguf", spec);
    const bytes = await Bun.file(path).slice(0, 100_000).arrayBuffer();
    writeFileSync(join(dir.path, "h2.gguf"), new Uint8Array(bytes));
    const p = await problemOf(join(dir.path, "h2.gguf"));
    expect(p.code).toBe("model_missing");
    expect(p.problem).toBe("truncated");
  });
});
