import { readdir } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import { readGgufHeader } from "../plan/gguf-read.ts";
import type { ModelInfo } from "../plan/model.ts";
import type { MemoOptions } from "../plan/model-memo.ts";
import {
  type ProjectorChoice,
  type ProjectorInfo,
  type ProjectorProblem,
  projectorError,
  projectorInfo,
  widthProblem,
} from "../plan/projector.ts";
import { isCoreError } from "../protocol/errors.ts";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import { answersFor, type DriveAnswers, statLate } from "../util/drive-answers.ts";
import { namesText } from "../util/listed-names.ts";
import { oneLanedAtATime } from "../util/one-at-a-time.ts";
import { within } from "../util/within.ts";
import { hubCacheDir, snapshotRootOf } from "./hf-cache.ts";
import { isGgufPath, isProjector } from "./pick-gguf.ts";
import { projectorsNear } from "./projectors-near.ts";
import { resolveModelPath, snapshotFilesAsync, snapshotListing } from "./resolve.ts";

/**
 * A model's `mmproj` setting as a projector file (docs/models.md "The projector"): a path is
 * read and checked against the model (a file that is missing, not a projector, or of another
 * width is a `model_plan_error` naming it and both widths: llama-server would exit, recordings
 * 105b–105d); `auto` takes an `mmproj*.gguf` from the model's hub snapshot, else the only one
 * beside the model file, used only when its width matches, F16 preferred; `none` is none.
 * `auto` never fails: what it passes over is a warning in the plan. `key` is the config key that
 * holds the setting (`models.<i>.mmproj` for a `models` entry), which a refusal names.
 */
export async function findProjector(
  setting: string,
  model: ModelInfo,
  key = "model.mmproj",
  options: ProjectorOptions = {},
): Promise<ProjectorChoice> {
  if (setting === "none") return { kind: "none", reason: "mmproj: none" };
  // An `hf:org/name:mmproj-F16.gguf` is a file of the cache, found as a model path is: the cache
  // folder's stat awaited first, as the model memo does, since the resolve reads its ref synchronously.
  const hf = setting.startsWith(HF_PREFIX);
  if (hf)
    await answered(hubCacheDir(process.env, process.env.HOME || homedir()), setting, model, key, options);
  const path = hf ? await resolveModelPath(setting, process.env, undefined, key) : setting;
  if (setting !== "auto")
    return { kind: "found", source: "config", info: await configured(path, model, key, options) };
  return auto(model, options);
}

/** `path`'s stat answered, else the projector `setting` is unreadable (its drive did not answer). */
async function answered(
  path: string,
  setting: string,
  model: ModelInfo,
  key: string,
  options: ProjectorOptions,
): Promise<void> {
  const late = await statLate(options.drives ?? answersFor(options), path);
  if (!late) return;
  const target = { path: model.path, width: model.n_embd, key };
  throw projectorError(
    setting,
    target,
    "unreadable",
    path === setting ? late : `its folder ${path}: ${late}`,
  );
}

async function configured(
  path: string,
  model: ModelInfo,
  key: string,
  options: ProjectorOptions,
): Promise<ProjectorInfo> {
  const target = { path: model.path, width: model.n_embd, key };
  // Its stat off the loop first, as the model's: one on a dead network mount (the model's drive
  // answering) was read synchronously, and the whole core froze with it.
  await answered(path, path, model, key, options);
  const read = await readProjector(path, options.drives ?? answersFor(options));
  if ("problem" in read) throw projectorError(path, target, read.problem, read.detail);
  const wrong = widthProblem(read, model.n_embd);
  if (wrong) throw projectorError(path, target, "width_mismatch", wrong, read.width);
  return read;
}

type Read = ProjectorInfo | { problem: ProjectorProblem; detail: string };

/** A projector's header; every way the file can be wrong as a problem, never a throw. */
async function readProjector(path: string, answers: DriveAnswers): Promise<Read> {
  try {
    return projectorInfo(await readGgufHeader(path, answers));
  } catch (err) {
    if (!isCoreError(err)) throw err;
    const problem = err.data?.problem;
    if (problem === "absent") return { problem: "absent", detail: "no such file" };
    if (problem === "not_gguf") return { problem: "not_projector", detail: "not a GGUF file" };
    return { problem: "unreadable", detail: err.message.replace(/^model [^:]*: /, "") };
  }
}

/**
 * Where `auto` looks: the model's hub snapshot, else the model's folder. Either is listed off the
 * loop after its stat answered (util/drive-answers.ts): a readdirSync of a folder on a dead
 * network mount froze the whole core, `ping` and `cancel` with it.
 */
async function candidates(
  modelPath: string,
  options: ProjectorOptions,
): Promise<{ where: "snapshot" | "folder"; files: string[]; late?: string }> {
  const snapshot = snapshotRootOf(modelPath);
  const where = snapshot === null ? "folder" : "snapshot";
  const folder = snapshot ?? dirname(modelPath);
  const answers = options.drives ?? answersFor(options);
  const late = await statLate(answers, folder);
  if (late) return { where, files: [], late };
  const names = await within(listingOf(folder, where, options, answers), answers.waitMs, "late" as const);
  if (names === "late")
    return {
      where,
      files: [],
      late: `its listing did not answer within ${answers.waitMs / 1000} s (a network drive offline?)`,
    };
  // A snapshot's are those of the model's own folder in it, else of the nearest folder above
  // (a projector at its top is found beside a model in a subfolder), never another model's
  // folder's: the one a pull brings (pick-file.ts). A folder's only its own names.
  const files =
    where === "snapshot"
      ? projectorsNear(relative(folder, modelPath).split("\\").join("/"), names)
      : names.filter((n) => isProjector(n) && isGgufPath(n)).sort();
  return { where, files: files.map((n) => join(folder, n)) };
}

/** Tests: the folder's listing, the snapshot's walk, the drives' lanes shared by several calls. */
export interface ProjectorOptions extends MemoOptions {
  readdir?: (folder: string) => Promise<string[]>;
  snapshotFiles?: (snapshot: string) => Promise<string[]>;
  drives?: DriveAnswers;
}

/** The folders' listings out, one at a time each, in the drives' lanes (util/one-at-a-time.ts). */
const listings = oneLanedAtATime<string[]>();

/**
 * The folder's names, waited for no longer than its stat: a stat can answer where its listing
 * hangs (an NFS client answers from cached attributes, its server gone), and an unbounded wait
 * hung the plan for good. In the drives' lanes (util/drive-answers.ts `laned`): a hung listing
 * holds a file thread for good, and started outside them, listings of models' folders on one dead
 * share took every thread, every file read and write of the core waiting with them. A folder
 * that cannot be listed holds no projector we could use.
 */
function listingOf(
  folder: string,
  where: "snapshot" | "folder",
  options: ProjectorOptions,
  answers: DriveAnswers,
): Promise<string[] | "late"> {
  const unlisted = () => [] as string[];
  // A snapshot's walk is the resolve's own lane (resolve.ts snapshotListing), shared while in flight.
  if (where === "snapshot")
    return snapshotListing(folder, answers, options.snapshotFiles ?? snapshotFilesAsync).catch(unlisted);
  const list = options.readdir ?? readdir;
  return listings(folder, answers, () => list(folder).catch(unlisted));
}

async function auto(model: ModelInfo, options: ProjectorOptions): Promise<ProjectorChoice> {
  const { where, files, late } = await candidates(model.path, options);
  if (late) return { kind: "none", reason: `mmproj: auto could not list ${placeName(where)}: ${late}` };
  if (files.length === 0)
    return { kind: "none", reason: `mmproj: auto found no mmproj*.gguf ${placeOf(where)}` };
  if (where === "folder" && files.length > 1)
    return passedOver(
      `mmproj: auto found ${files.length} projectors beside the model (${namesText(files.map((f) => basename(f)))}); name one with mmproj`,
    );
  const answers = options.drives ?? answersFor(options);
  const read = await Promise.all(files.map((f) => readProjector(f, answers)));
  const fitting: ProjectorInfo[] = [];
  const skipped: string[] = [];
  read.forEach((r, i) => {
    if ("problem" in r) skipped.push(`${basename(files[i]!)}: ${r.detail}`);
    else {
      const wrong = widthProblem(r, model.n_embd);
      if (wrong) skipped.push(`${basename(files[i]!)}: ${wrong}`);
      else fitting.push(r);
    }
  });
  const best = preferF16(fitting);
  // Named as a listing's names are (util/listed-names.ts): a folder of thousands made a warning of megabytes.
  if (!best)
    return passedOver(`mmproj: auto used no projector ${placeOf(where)}: ${namesText(skipped, 20, "; ")}`);
  return { kind: "found", source: "auto", info: best };
}

function placeName(where: "snapshot" | "folder"): string {
  return where === "snapshot" ? "the model's hub snapshot" : "the model's folder";
}

/** Where `auto` looked; a snapshot's other models' projectors are in it, but not looked at (`candidates`). */
function placeOf(where: "snapshot" | "folder"): string {
  return where === "snapshot"
    ? "in the model's hub snapshot beside it or in a folder above it (another model's folder's are not its)"
    : "beside the model";
}

function passedOver(reason: string): ProjectorChoice {
  return { kind: "none", reason, warning: reason };
}

/** F16 first (what llama.cpp's own conversions ship as the default), then by file name. */
export function preferF16<T extends Pick<ProjectorInfo, "file_type" | "path">>(
  found: readonly T[],
): T | undefined {
  const rank = (p: T) => (p.file_type === "F16" ? 0 : 1);
  return [...found].sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path))[0];
}
