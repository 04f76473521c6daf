import { CoreError } from "../protocol/errors.ts";
import type { HubFile } from "./hub-client.ts";

/**
 * Which file(s) of a repo a pull means: an explicit file, a quantization matched against the
 * GGUF names, or the repo's only GGUF. A split model (`name-00001-of-00003.gguf`) is one model:
 * naming any part, or a quant that matches it, takes every part, first one first. Pure.
 */

const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** One model in a repo: a single GGUF, or every part of a split one. */
export interface ModelGroup {
  /** The name a user sees: the file, or `prefix-*-of-N.gguf` for a split model. */
  label: string;
  parts: HubFile[];
}

export interface Wanted {
  repo: string;
  quant?: string | undefined;
  file?: string | undefined;
}

/** The GGUF files of a listing grouped into models (split parts together, in order). */
export function groupModels(files: HubFile[]): ModelGroup[] {
  const groups = new Map<string, ModelGroup>();
  for (const f of files) {
    if (!f.path.toLowerCase().endsWith(".gguf")) continue;
    const split = SPLIT.exec(f.path);
    const key = split ? `${split[1]}\0${split[3]}` : f.path;
    const label = split ? `${split[1]}-*-of-${split[3]}.gguf` : f.path;
    const group = groups.get(key) ?? { label, parts: [] };
    group.parts.push(f);
    groups.set(key, group);
  }
  for (const g of groups.values()) g.parts.sort((a, b) => a.path.localeCompare(b.path));
  return [...groups.values()].sort((a, b) => a.label.localeCompare(b.label));
}

/** The quantization named in a GGUF file name (Q4_K_M, IQ3_XS, F16, BF16…), upper-cased; null if none. */
export function quantOf(path: string): string | null {
  const base = path.split("/").pop()!;
  const m = /(?:^|[-._])((?:I?Q\d+(?:_[A-Z0-9]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?|TQ\d_\d)(?=[-.])/i.exec(base);
  return m ? m[1]!.toUpperCase() : null;
}

/** Projector files (vision towers) sit beside the model; a quant or a bare repo never means them. */
function isProjector(path: string): boolean {
  return /^mmproj/i.test(path.split("/").pop()!);
}

/** `quant` as a whole token of the file name, case-insensitively: `Q4_K` does not match `Q4_K_M`. */
function matchesQuant(path: string, quant: string): boolean {
  const base = path.split("/").pop()!.toLowerCase();
  const q = quant.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?:^|[-._])${q}(?=[-.])`).test(base);
}

/** The parts to download, first one first; invalid_request naming what the repo has otherwise. */
export function pickFiles(want: Wanted, files: HubFile[]): HubFile[] {
  const models = groupModels(files);
  if (want.file) {
    const named = files.find((f) => f.path === want.file);
    if (!named) throw choiceError(want, models, `has no file ${want.file}`, "not_found");
    const group = models.find((g) => g.parts.includes(named));
    return group ? completeParts(want, group) : [named];
  }
  const candidates = models.filter((g) => !isProjector(g.parts[0]!.path));
  if (candidates.length === 0) throw choiceError(want, models, "has no GGUF file", "no_gguf");
  if (want.quant) {
    const quant = want.quant;
    const hits = candidates.filter((g) => matchesQuant(g.parts[0]!.path, quant));
    if (hits.length === 0)
      throw choiceError(want, models, `has no GGUF of quantization ${quant}`, "not_found");
    if (hits.length > 1)
      throw choiceError(
        want,
        hits,
        `has ${hits.length} GGUFs of quantization ${quant}; name one file`,
        "ambiguous",
      );
    return completeParts(want, hits[0]!);
  }
  if (candidates.length > 1)
    throw choiceError(want, candidates, "has several GGUFs; name a quantization or a file", "ambiguous");
  return completeParts(want, candidates[0]!);
}

/** Every part of a split model must be listed: a missing part is a broken repo, said plainly. */
function completeParts(want: Wanted, group: ModelGroup): HubFile[] {
  const split = SPLIT.exec(group.parts[0]!.path);
  if (!split) return group.parts;
  const total = Number(split[3]);
  const have = new Set(group.parts.map((p) => Number(SPLIT.exec(p.path)![2])));
  const missing = Array.from({ length: total }, (_, i) => i + 1).filter((n) => !have.has(n));
  if (missing.length > 0)
    throw new CoreError(
      "invalid_request",
      `${want.repo}: ${group.label} lacks part(s) ${missing.join(", ")} of ${total}`,
      { repo: want.repo, file: group.parts[0]!.path, cause: "not_found" },
    );
  return group.parts;
}

function choiceError(want: Wanted, shown: ModelGroup[], what: string, cause: string): CoreError {
  const labels = shown.map((g) => g.label);
  const quants = [...new Set(shown.map((g) => quantOf(g.parts[0]!.path)).filter((q) => q !== null))].sort();
  const list =
    labels.length === 0
      ? ""
      : `; it has: ${labels.slice(0, 20).join(", ")}${labels.length > 20 ? ", …" : ""}`;
  return new CoreError("invalid_request", `${want.repo} ${what}${list}`, {
    repo: want.repo,
    ...(want.file ? { file: want.file } : {}),
    ...(want.quant ? { quant: want.quant } : {}),
    cause,
    available: labels,
    quantizations: quants,
  });
}
