import { closeSync, readSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { gguf } from "@huggingface/gguf";
import { CoreError } from "../protocol/errors.ts";
import { type DriveAnswers, drives, statLate } from "../util/drive-answers.ts";
import { NotRegularFile, openRegularFile, readFailure } from "../util/read-file.ts";
import { terminalText } from "../util/terminal-text.ts";
import { cutText } from "../util/text-cut.ts";
import { ggmlBlockSize, ggmlTypeName, tensorBytes } from "./ggml-types.ts";
import {
  alignmentOf,
  GgufInvalid,
  GgufTruncated,
  KEEP_ARRAY_MAX,
  quotedName,
  type ScannedGguf,
  scanGgufSliced,
  versionProblem,
} from "./gguf-scan.ts";
import { splitProblem } from "./gguf-split.ts";
import { shardFileName, shardName } from "./shard-name.ts";

/**
 * The edge that reads GGUF headers from disk: header and tensor infos only (`gguf-scan.ts`,
 * front to back in 1 MiB windows until the tensor table ends), never tensor data. Every way a model file can be
 * wrong becomes a `model_missing` CoreError whose message says which.
 */

export interface TensorEntry {
  name: string;
  shape: number[];
  type: number;
  bytes: number;
}

/** What the planner needs from a GGUF: scalar metadata (arrays reduced to lengths) and tensors. */
export interface GgufHeader {
  /** The path llama-server gets (the first shard of a split model). */
  path: string;
  files: string[];
  version: number;
  /** Sum of the files' sizes on disk. */
  size_bytes: number;
  metadata: Record<string, number | string | boolean | number[] | { array_length: number }>;
  tensors: TensorEntry[];
}

export type ModelProblem = "absent" | "unreadable" | "not_gguf" | "truncated";

function problem(kind: ModelProblem, path: string, detail: string): CoreError {
  return new CoreError("model_missing", `model ${path}: ${detail}`, { path, problem: kind });
}

/** The shard files of a split model (name-00001-of-00003.gguf), or just the one file. */
export function shardPaths(path: string): string[] {
  const shard = shardName(basename(path));
  if (!shard) return [path];
  return Array.from({ length: shard.total }, (_, i) =>
    join(dirname(path), shardFileName(shard.stem, i + 1, shard.total)),
  );
}

export async function readGgufHeader(path: string, ask: DriveAnswers = drives): Promise<GgufHeader> {
  const files = shardPaths(path);
  const merged: GgufHeader = {
    path: files[0]!,
    files,
    version: 0,
    size_bytes: 0,
    metadata: {},
    tensors: [],
  };
  const parts: GgufHeader[] = [];
  for (const [i, file] of files.entries()) {
    const one = await readOneFile(file, files.length > 1 ? `shard ${i + 1} of ${files.length}` : null, ask);
    parts.push(one);
    if (i === 0) {
      merged.version = one.version;
      merged.metadata = one.metadata;
    }
    merged.size_bytes += one.size_bytes;
    // Not a spread: a million tensors' arguments overflow the stack.
    for (const t of one.tensors) merged.tensors.push(t);
  }
  const wrong = splitProblem(parts);
  if (wrong) throw problem("not_gguf", merged.path, `not one split model: ${wrong}`);
  return merged;
}

async function readOneFile(path: string, shardLabel: string | null, ask: DriveAnswers): Promise<GgufHeader> {
  const label = shardLabel ? `${path} (${shardLabel})` : path;
  // The reads below are synchronous: on a dead network mount (a projector's, a split's later
  // part) one hung for minutes and the core with it. Its stat is asked off the loop first.
  const late = await statLate(ask, path);
  if (late) throw problem("unreadable", label, `unreadable: ${late}`);
  let opened: { fd: number; size: number };
  try {
    // Never a blocking open: a FIFO here would stop the whole core (util/read-file.ts).
    opened = openRegularFile(path);
  } catch (err) {
    if (err instanceof NotRegularFile)
      throw err.kind === "a directory"
        ? problem("not_gguf", label, "not a GGUF: it is a directory")
        : problem("unreadable", label, `not a regular file (${err.kind})`);
    // Absent only when nothing is there: a loop of links or a path too long was called "no such
    // file", and a host offered a download of what the disk holds.
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") throw problem("absent", label, "absent: no such file");
    throw problem("unreadable", label, `unreadable: ${readFailure(err)}`);
  }
  const { fd, size } = opened;
  try {
    return await readOpened(fd, size, path, label);
  } finally {
    closeSync(fd);
  }
}

async function readOpened(fd: number, size: number, path: string, label: string): Promise<GgufHeader> {
  const head = readAt(fd, size, 0, 24);
  if (head.length === 0) throw problem("not_gguf", label, "not a GGUF: the file is empty");
  if (head.length < 4 || new TextDecoder().decode(head.subarray(0, 4)) !== "GGUF") {
    throw problem("not_gguf", label, "not a GGUF: it does not start with the GGUF magic bytes");
  }
  if (head.length < 24) throw problem("truncated", label, truncatedMessage(size, 24));

  let scanned: ScannedGguf;
  try {
    // The header is read front to back in 1 MiB windows, never past the file's end; the loop
    // has its turns meanwhile (scan-pauses.ts STEPS_PER_TURN), the fd held open till the end.
    scanned = await scanGgufSliced((position, length) => readAt(fd, size, position, length));
  } catch (err) {
    if (err instanceof GgufTruncated)
      throw problem(
        "truncated",
        label,
        `truncated: the header ends early (${size} bytes): an interrupted download?`,
      );
    if (err instanceof GgufInvalid) throw problem("not_gguf", label, `not a valid GGUF: ${err.message}`);
    throw problem("unreadable", label, `unreadable: ${(err as Error).message}`);
  }

  let read: ReturnType<typeof headerOfScan>;
  try {
    read = headerOfScan(scanned, path, size);
  } catch (err) {
    if (err instanceof GgufInvalid) throw problem("not_gguf", label, `not a valid GGUF: ${err.message}`);
    throw err;
  }
  const { header, dataEnd } = read;
  if (size < dataEnd) throw problem("truncated", label, truncatedMessage(size, dataEnd));
  return header;
}

/** Up to `length` bytes at `position` (fewer only at the end of the file). */
function readAt(fd: number, size: number, position: number, length: number): Uint8Array {
  const want = Math.max(0, Math.min(length, size - position));
  const buf = new Uint8Array(want);
  let got = 0;
  while (got < want) {
    const n = readSync(fd, buf, got, want - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

/** A header the library parsed (remote files, read by range requests) in the scanner's shape. */
export function headerOfParsed(
  parsed: Awaited<ReturnType<typeof gguf>>,
  path: string,
  size: number,
): { header: GgufHeader; dataEnd: number } {
  // The library divides by whatever alignment the file gives: checked as the local scan does.
  alignmentOf(parsed.metadata as Record<string, unknown>);
  const scanned: ScannedGguf = {
    version: Number(parsed.metadata.version),
    littleEndian: parsed.littleEndian,
    metadata: scalarMetadata(parsed.metadata as Record<string, unknown>),
    tensorInfos: parsed.tensorInfos.map((t) => ({
      name: t.name,
      shape: t.shape.map(Number),
      dtype: t.dtype,
      offset: Number(t.offset),
    })),
    tensorDataOffset: Number(parsed.tensorDataOffset),
  };
  return headerOfScan(scanned, path, size);
}

/**
 * More layers than any model has (llama.cpp's own limit is 512): a header's `block_count`, or a
 * tensor's `blk.N`, past it is not a model's. The planner works per layer, so 30 million of them
 * held the core's loop for seconds and gigabytes before its stack gave out (docs/plan.md).
 */
export const MAX_LAYERS = 4096;

/**
 * The shape keys the planner counts with (model.ts, model-attention.ts). llama.cpp reads them as
 * unsigned integers, so a float NaN or Infinity, or a negative number, is no model's: a NaN width
 * made every byte of the plan NaN, which compares as fitting anywhere and was held as nothing in
 * the budget of several models (docs/plan.md).
 */
const COUNT_KEY =
  /\.(context_length|embedding_length|(expert_)?feed_forward_length|expert_(used_)?count|vocab_size|rope\.dimension_count|attention\.(head_count(_kv)?|key_length(_mla)?|value_length|kv_lora_rank|sliding_window))$/;
/**
 * A projector's (projector.ts): a NaN merge made its image tokens, its compute buffer, the
 * plan's bytes and `--cache-ram` NaN, an argument llama-server refuses.
 */
const PROJECTOR_COUNT_KEY =
  /^clip\.vision\.(image_size|patch_size|spatial_merge_size|projection_dim|projector\.scale_factor)$/;

/**
 * llama.cpp reads these as 32-bit unsigned integers: a larger one (an f32 of 2^40, a u64) is no
 * model's, and made the plan's bytes Infinity.
 */
const MAX_COUNT = 2 ** 32 - 1;
const isCount = (v: unknown) =>
  typeof v === "bigint"
    ? v >= 0n && v <= BigInt(MAX_COUNT)
    : typeof v !== "number" || (v >= 0 && v <= MAX_COUNT);

/**
 * A key or tensor name as a problem quotes it: the file's text, cut between characters, its
 * controls and bidi overrides escaped as the log escapes them (the message reaches the host).
 */
const quoted = (text: string): string => terminalText(cutText(text, 80));

/**
 * Longer than any architecture's name (llama.cpp's are a word: `llama`, `command-r`,
 * `t5encoder`), which llama.cpp would not know either. Every key the planner reads is prefixed
 * with it, once per layer: a megabyte's held the loop for seconds.
 */
const MAX_ARCHITECTURE = 128;

/** Why the header cannot be a model's layers or shape, or undefined. */
function layerProblem(scanned: ScannedGguf): string | undefined {
  const arch = scanned.metadata["general.architecture"];
  if (typeof arch === "string" && arch.length > MAX_ARCHITECTURE)
    return `general.architecture is ${arch.length} characters long, not the name of an architecture (${quoted(arch)})`;
  for (const [key, value] of Object.entries(scanned.metadata)) {
    const counts = Array.isArray(value) ? value : [value];
    // An array too: the planner takes its largest entry (model-metadata.ts), so [NaN] or
    // [10000000] passed and made the plan NaN, or held the loop for seconds.
    const layers = counts.find((v) => typeof v === "number" && !(v >= 0 && v <= MAX_LAYERS));
    if (key.endsWith(".block_count") && layers !== undefined)
      return `${quoted(key)} is ${layers}, not a count within the ${MAX_LAYERS} layers a model may have`;
    if ((COUNT_KEY.test(key) || PROJECTOR_COUNT_KEY.test(key)) && !counts.every(isCount))
      return `${quoted(key)} is ${counts.find((v) => !isCount(v))}, not a count a model can have`;
  }
  for (const t of scanned.tensorInfos) {
    const m = /^blk\.(\d+)\./.exec(t.name);
    if (m && Number(m[1]) >= MAX_LAYERS)
      return `tensor ${quoted(t.name)} names layer ${quoted(m[1] as string)}, over the ${MAX_LAYERS} layers a model may have`;
  }
  return undefined;
}

/**
 * The planner's view of one GGUF file (local or remote), and where its tensor data ends (a file
 * shorter than that was cut off). A header whose layers no model has is GgufInvalid.
 */
function headerOfScan(
  scanned: ScannedGguf,
  path: string,
  size: number,
): { header: GgufHeader; dataEnd: number } {
  // The library (remote headers) reads version 1 and big-endian files too.
  const version = versionProblem(scanned.version, scanned.littleEndian);
  if (version) throw new GgufInvalid(version);
  const layers = layerProblem(scanned);
  if (layers) throw new GgufInvalid(layers);
  const dataStart = scanned.tensorDataOffset;
  let end = dataStart;
  const tensors: TensorEntry[] = scanned.tensorInfos.map((t) => {
    const elements = t.shape.reduce((a, b) => a * b, 1);
    // Past 2^53 (a petabyte at the least) no disk holds it, and llama.cpp refuses one past 2^63:
    // it is no model's, not an interrupted download to fetch again to the same end.
    if (!Number.isSafeInteger(elements))
      throw new GgufInvalid(
        `the tensor ${quotedName(t.name)} has ${elements} elements, more than any file holds`,
      );
    const wrong = typeProblem(t);
    if (wrong) throw new GgufInvalid(`the tensor ${quotedName(t.name)} ${wrong}`);
    const bytes = tensorBytes(t.dtype, elements);
    end = Math.max(end, dataStart + t.offset + bytes);
    return { name: t.name, shape: t.shape, type: t.dtype, bytes };
  });
  const table = tableProblem(scanned, tensors, alignmentOf(scanned.metadata));
  if (table) throw new GgufInvalid(table);
  const header: GgufHeader = {
    path,
    files: [path],
    version: scanned.version,
    size_bytes: size,
    metadata: scanned.metadata,
    tensors,
  };
  return { header, dataEnd: end };
}

/**
 * Why llama.cpp's reader (gguf.cpp) refuses a tensor's type, or undefined: a type id it does not
 * have, or rows (`ne[0]`) that are not whole blocks of the type. Both were sized (the one as
 * F32, the other rounded up to a block) and planned, and llama-server then refused the file.
 */
function typeProblem(t: ScannedGguf["tensorInfos"][number]): string | undefined {
  const block = ggmlBlockSize(t.dtype);
  if (block === undefined) return `is of ggml type ${t.dtype}, a type llama.cpp does not have`;
  // A tensor of no dimensions is one element, as ggml counts it.
  const row = t.shape[0] ?? 1;
  if (row % block !== 0)
    return `has rows of ${row} elements, not whole blocks of ${block} (${ggmlTypeName(t.dtype)})`;
  return undefined;
}

/**
 * Why llama.cpp's reader (gguf.cpp) refuses the tensor table, or undefined: a name of 64 bytes
 * or more (GGML_MAX_NAME), over 4 dimensions (GGML_MAX_DIMS), or data not where the tensors
 * before it end, each padded to the alignment. The plan said such a file fits.
 */
function tableProblem(scanned: ScannedGguf, tensors: TensorEntry[], alignment: number): string | undefined {
  let end = 0;
  for (const [i, t] of tensors.entries()) {
    const named = `the tensor ${quotedName(t.name)}`;
    const nameBytes = Buffer.byteLength(t.name);
    if (nameBytes >= 64) return `${named}: its name is ${nameBytes} bytes, llama.cpp takes 63`;
    if (t.shape.length > 4) return `${named} has ${t.shape.length} dimensions, llama.cpp takes 4`;
    const offset = scanned.tensorInfos[i]!.offset;
    if (offset !== end)
      return `${named} has its data at byte ${offset} of the data, where the tensors before it end at ${end}`;
    end += Math.ceil(t.bytes / alignment) * alignment;
  }
  return undefined;
}

function truncatedMessage(size: number, expected: number): string {
  return `truncated: the file has ${size} bytes but its header describes ${expected}: an interrupted download? Download it again`;
}

/** Drops big arrays (the vocabulary) down to their length so the header costs little memory. */
function scalarMetadata(raw: Record<string, unknown>): GgufHeader["metadata"] {
  const out: GgufHeader["metadata"] = {};
  for (const [key, value] of Object.entries(raw)) {
    if (typeof value === "bigint") out[key] = Number(value);
    else if (typeof value === "number" || typeof value === "string" || typeof value === "boolean")
      out[key] = value;
    else if (Array.isArray(value)) {
      const numeric =
        value.length <= KEEP_ARRAY_MAX && value.every((v) => typeof v === "number" || typeof v === "bigint");
      out[key] = numeric ? value.map(Number) : { array_length: value.length };
    }
  }
  return out;
}
