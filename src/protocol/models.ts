import { z } from "zod";

/** `models`: no params (unknown ones are refused); its result (and `local-ai models --json`), strict. */
export const ModelsParamsSchema = z.strictObject({});

export const MODEL_PROBLEMS = [
  "absent",
  "unreadable",
  "not_gguf",
  "truncated",
  "broken_link",
  "incomplete_split",
] as const;

export const ModelEntrySchema = z.strictObject({
  /** The file llama-server would get (a split model's first part). */
  path: z.string(),
  /** Every part of a split model, else just `path`. */
  files: z.array(z.string()),
  /** `hf_cache`: a snapshot in the Hugging Face cache; `folder`: a file beside the config or its model. */
  source: z.enum(["hf_cache", "folder"]),
  /** org/name, for cached models. */
  repo: z.string().nullable(),
  /** The snapshot's commit, for cached models. */
  commit: z.string().nullable(),
  /** The cache refs (branches, tags) that point at that commit. */
  refs: z.array(z.string()),
  /** The path inside the repo (cached) or the file name (folder). */
  file: z.string(),
  /** What to write as model.path to use it: `hf:org/name:file.gguf` (cached, on main), else the path. */
  model_path: z.string(),
  /** The config's model.path names this file. */
  configured: z.boolean(),
  /** The name the config gives it (`default` for model.path, else a `models` entry's), else null. */
  name: z.string().nullable(),
  /** A llama-server of this core serves it now. */
  loaded: z.boolean(),
  size_bytes: z.number().int().nonnegative(),
  /** As the publisher named it (general.file_type: Q4_K_M…), else the main weight type. */
  quantization: z.string().nullable(),
  architecture: z.string().nullable(),
  parameters: z.number().nonnegative().nullable(),
  /** The plan's verdict with the config's settings; null when the file could not be read. */
  fits: z.boolean().nullable(),
  /** Context per slot the plan would give it, when it fits. */
  context_per_slot: z.number().int().positive().nullable(),
  /**
   * Whether it reads images: its `mmproj` setting (`auto` for a file the config does not name)
   * finds a projector of its width (docs/models.md "The projector"); null when unreadable.
   */
  vision: z.boolean().nullable(),
  /** How it fits, why it does not, or why it could not be read. */
  verdict: z.string(),
  /** Why the file could not be read, when it could not. */
  problem: z.enum(MODEL_PROBLEMS).nullable(),
});
export type ModelEntry = z.infer<typeof ModelEntrySchema>;

/**
 * Why something the listing looks at is left out of it (docs/models.md "What was left out"):
 * `no_answer` its drive or listing did not answer within the drive's wait (a network share
 * offline); `unreadable` it could not be listed (permission denied…); `deadline` the hub cache
 * walk's one deadline was over before it was walked whole.
 */
export const LEFT_OUT_REASONS = ["no_answer", "unreadable", "deadline"] as const;

/** The most paths `left_out` lists; `left_out_total` counts them all (docs/models.md "What was left out"). */
export const LEFT_OUT_MAX = 100;

export const LeftOutSchema = z.strictObject({
  /** A folder (beside the config, the cache, a cached repo, a snapshot) or a file. */
  path: z.string(),
  reason: z.enum(LEFT_OUT_REASONS),
});
export type LeftOut = z.infer<typeof LeftOutSchema>;

export const ModelsResultSchema = z.strictObject({
  /** Fitting models first (largest first), then those that do not fit (smallest first), then unreadable ones. */
  models: z.array(ModelEntrySchema),
  /** The Hugging Face cache that was scanned. */
  cache_dir: z.string(),
  /** The folders scanned for loose GGUF files. */
  folders: z.array(z.string()),
  /**
   * What was not looked at, each once, by path, the first LEFT_OUT_MAX; absent when nothing was
   * left out (a host that predates it sees the same result as before), so a shorter list says why.
   */
  left_out: z.array(LeftOutSchema).min(1).max(LEFT_OUT_MAX).optional(),
  /** How many paths were left out in all (more than `left_out` lists when over LEFT_OUT_MAX); with it only. */
  left_out_total: z.number().int().positive().optional(),
});
export type ModelsResult = z.infer<typeof ModelsResultSchema>;
