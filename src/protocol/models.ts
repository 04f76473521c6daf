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

export const ModelsResultSchema = z.strictObject({
  /** Fitting models first (largest first), then those that do not fit (smallest first), then unreadable ones. */
  models: z.array(ModelEntrySchema),
  /** The Hugging Face cache that was scanned. */
  cache_dir: z.string(),
  /** The folders scanned for loose GGUF files. */
  folders: z.array(z.string()),
});
export type ModelsResult = z.infer<typeof ModelsResultSchema>;
