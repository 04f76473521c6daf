import { CoreError } from "../protocol/errors.ts";
import { listedNames, namesText } from "../util/listed-names.ts";
import type { HubFile } from "./hub-client.ts";
import { type GgufGroup, groupGgufs, isProjector, pickAmong } from "./pick-gguf.ts";
import { projectorsNear } from "./projectors-near.ts";

/**
 * Which file(s) of a repo a pull means, by the one picker the cache resolver and the remote fit
 * check use (`pick-gguf.ts`), so `pull org/x:Q4_K_M` takes exactly what `hf:org/x:Q4_K_M` then
 * resolves (docs/models.md). This file adds what only a pull needs: the hub's file records back,
 * and errors that list what the repo has. Pure.
 */

export interface Wanted {
  repo: string;
  quant?: string | undefined;
  file?: string | undefined;
}

/** A model as a user sees it named: the file, or `prefix-*-of-N.gguf` for a split model. */
function label(group: GgufGroup): string {
  return group.total > 1 ? group.first.replace(/-\d{5}(-of-\d{5}\.gguf)$/i, "-*$1") : group.first;
}

const QUANT = /(?:^|[-._])((?:I?Q\d+(?:_[A-Z0-9]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?|TQ\d_\d)(?=[-.]|$)/i;

/**
 * The quantization a GGUF path names (Q4_K_M, IQ3_XS, F16, BF16…), upper-cased; null if none.
 * The file name first, then its folders (`Q4_K_M/model-00001-of-00002.gguf`).
 */
export function quantOf(path: string): string | null {
  const segments = path.split("/");
  const base = segments.pop()!.replace(/\.gguf$/i, "");
  for (const name of [base, ...segments.reverse()]) {
    const m = QUANT.exec(name);
    if (m) return m[1]!.toUpperCase();
  }
  return null;
}

/** The parts to download, first one first; invalid_request naming what the repo has otherwise. */
export function pickFiles(want: Wanted, files: readonly HubFile[]): HubFile[] {
  const byPath = new Map(files.map((f) => [f.path, f]));
  const paths = [...byPath.keys()];
  // Grouped once, for the pick and for the errors that list what the repo has.
  const models = groupGgufs(paths);
  const chosen = (group: GgufGroup) => completeParts(want, group).map((p) => byPath.get(p)!);
  if (want.file) {
    const named = byPath.get(want.file);
    if (!named) throw choiceError(want, models, `has no file ${want.file}`, "not_found");
    const pick = pickAmong(models, paths, { file: want.file, quant: undefined });
    // A listed .gguf that names no model of the listing (a part whose first part is missing) is
    // taken as it is. `file` is always a .gguf (RepoFileSchema): no README or template is pulled.
    return pick.kind === "one" ? chosen(pick.group) : [named];
  }
  const candidates = models.filter((g) => !isProjector(g.first));
  if (candidates.length === 0) throw choiceError(want, models, "has no GGUF file", "no_gguf");
  const pick = pickAmong(models, paths, { quant: want.quant, file: undefined });
  if (pick.kind === "one") return chosen(pick.group);
  if (pick.kind === "none")
    throw choiceError(want, models, `has no GGUF of quantization ${want.quant}`, "not_found");
  // A set, not a scan of the matches per candidate: a listing of 10^5 names was 10^10 compares.
  const matched = new Set(pick.matches);
  const hits = candidates.filter((g) => matched.has(g.first));
  if (want.quant)
    throw choiceError(
      want,
      hits,
      `has ${hits.length} GGUFs of quantization ${want.quant}; name one file`,
      "ambiguous",
    );
  throw choiceError(want, hits, "has several GGUFs; name a quantization or a file", "ambiguous");
}

/** Every part of a split model must be listed: a missing part is a broken repo, said plainly. */
function completeParts(want: Wanted, group: GgufGroup): string[] {
  if (group.missing.length === 0) return group.parts;
  const number = (p: string) => group.parts.indexOf(p) + 1;
  throw new CoreError(
    "invalid_request",
    `${want.repo}: ${label(group)} lacks part(s) ${group.missing.map(number).join(", ")}${group.parts.length < group.total ? ", …" : ""} of ${group.total}`,
    { repo: want.repo, file: group.first, cause: "not_found" },
  );
}

function choiceError(want: Wanted, shown: GgufGroup[], what: string, cause: string): CoreError {
  const labels = shown.map(label).sort((a, b) => a.localeCompare(b));
  const quants = [...new Set(shown.map((g) => quantOf(g.first)).filter((q) => q !== null))].sort();
  const list = labels.length === 0 ? "" : `; it has: ${namesText(labels)}`;
  return new CoreError("invalid_request", `${want.repo} ${what}${list}`, {
    repo: want.repo,
    ...(want.file ? { file: want.file } : {}),
    ...(want.quant ? { quant: want.quant } : {}),
    cause,
    ...listedNames("available", labels),
    ...listedNames("quantizations", quants),
  });
}

/** Projector types by preference: F16 (what llama.cpp's conversions ship first), then finer to coarser. */
const PROJECTOR_PREFERENCE = ["F16", "BF16", "F32", "Q8_0"];

/**
 * The vision projector a pull brings with the model whose first part is `model` (docs/models.md
 * "The projector"): an `mmproj*.gguf` of its own folder, else of the nearest folder above it
 * (`projectorsNear`), F16 preferred, then by name; null when there is none. Its width is checked
 * when the model is planned (`mmproj: auto` takes it from the same snapshot, by the same rule).
 */
export function pickProjector(files: readonly HubFile[], model: string): HubFile | null {
  const rank = (f: HubFile) => {
    const i = PROJECTOR_PREFERENCE.indexOf(quantOf(f.path) ?? "");
    return i < 0 ? PROJECTOR_PREFERENCE.length : i;
  };
  const near = new Set(
    projectorsNear(
      model,
      files.map((f) => f.path),
    ),
  );
  const projectors = files.filter((f) => near.has(f.path));
  return [...projectors].sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path))[0] ?? null;
}
