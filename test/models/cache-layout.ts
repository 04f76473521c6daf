import { createHash } from "node:crypto";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { repoFolderName } from "../../src/models/hf-cache.ts";
import { denseModel, F16, type GgufSpec, Q4_K, writeGguf } from "../fixtures/gguf-writer.ts";

/**
 * Lays a repo out in a Hugging Face cache as huggingface_hub does: blobs/<sha>, the snapshot's
 * files as relative links to them, refs/<revision> holding the commit. A file given as a
 * GgufSpec is written as a real (sparse) GGUF; as a string, as that text; as null, a link
 * whose blob is missing.
 */
export function layRepo(
  cacheDir: string,
  repo: string,
  files: Record<string, GgufSpec | string | null>,
  options: { commit?: string; refs?: string[] } = {},
): { root: string; commit: string; snapshot: string } {
  const root = join(cacheDir, repoFolderName(repo));
  const commit = options.commit ?? createHash("sha1").update(repo).digest("hex");
  const snapshot = join(root, "snapshots", commit);
  const blobs = join(root, "blobs");
  mkdirSync(blobs, { recursive: true });
  mkdirSync(snapshot, { recursive: true });
  for (const [file, content] of Object.entries(files)) {
    // A stand-in for the LFS sha256: unique per repo and file (the resolver never checks it).
    const sha = createHash("sha256").update(`${repo}/${commit}/${file}`).digest("hex");
    const blob = join(blobs, sha);
    if (typeof content === "string") writeFileSync(blob, content);
    else if (content !== null) writeGguf(blobs, sha, content);
    const link = join(snapshot, ...file.split("/"));
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(relative(dirname(link), blob), link);
  }
  for (const ref of options.refs ?? ["main"]) {
    const refFile = join(root, "refs", ref);
    mkdirSync(dirname(refFile), { recursive: true });
    writeFileSync(refFile, commit);
  }
  return { root, commit, snapshot };
}

/** A small model any machine fits; `fileType` is general.file_type (15 Q4_K_M, 7 Q8_0, 1 F16). */
export function tinyModel(fileType = 15, layers = 4): GgufSpec {
  return denseModel({
    arch: "llama",
    layers,
    embd: 256,
    heads: 4,
    kvHeads: 4,
    ff: 512,
    vocab: 1000,
    ctx: 2048,
    type: fileType === 1 ? F16 : fileType === 7 ? 8 : Q4_K,
    extra: { "general.file_type": { type: "u32", value: fileType } },
  });
}

/**
 * `tinyModel` cut in two parts (each tensor in one part only: llama.cpp refuses a tensor in two,
 * and so does the planner), for a split model's `-00001-of-00002` and `-00002-of-00002` files.
 */
export function tinySplit(fileType = 15): [GgufSpec, GgufSpec] {
  const model = tinyModel(fileType);
  const half = Math.floor(model.tensors.length / 2);
  return [
    { ...model, tensors: model.tensors.slice(0, half) },
    { ...model, tensors: model.tensors.slice(half) },
  ];
}
