import { z } from "zod";
import { FitVerdictSchema } from "./fit-verdict.ts";
import { QuantSchema, RepoFileSchema, RepoIdSchema, RevisionSchema } from "./model-ref.ts";

/** `pull` (docs/models.md): a GGUF from the hub into the shared cache. */
export const PullParamsSchema = z
  .strictObject({
    /** `org/name` on the hub. */
    repo: RepoIdSchema,
    /** A quantization (Q4_K_M), matched case-insensitively against the repo's GGUF names. */
    quant: QuantSchema.optional(),
    /** A .gguf path in the repo (any part of a split model brings every part). */
    file: RepoFileSchema.optional(),
    /** A branch, tag or commit. */
    revision: RevisionSchema.default("main"),
  })
  .refine((p) => !(p.quant && p.file), { message: "give quant or file, not both", path: ["file"] });

const bytes = z.number().int().nonnegative();

/** `download_progress`: one file's progress, at least every 500 ms and at most ~10 a second. */
export const DownloadProgressFields = z.object({
  file: z.string(),
  part: z.number().int().positive(),
  parts: z.number().int().positive(),
  /** `download`: bytes arriving; `check`: hashing the downloaded bytes to verify them; `wait`: another pull is writing this file. */
  phase: z.enum(["download", "check", "wait"]),
  bytes_done: bytes,
  total: bytes,
  bytes_per_s: z.number().nonnegative(),
  eta_s: z.number().nonnegative().nullable(),
});
export type DownloadProgress = z.infer<typeof DownloadProgressFields>;

export const PullEventFields = { download_progress: DownloadProgressFields } as const;

export const PullResultSchema = z.object({
  repo: z.string(),
  revision: z.string(),
  commit: z.string(),
  /** The snapshot path to put in `model.path` (the first part of a split model). */
  path: z.string(),
  size_bytes: bytes,
  sha256: z.string(),
  /** The vision projector pulled with the model (a snapshot path, also in `files`; `mmproj: auto` finds it); null: the repo has none. */
  mmproj: z.string().nullable(),
  files: z.array(z.object({ file: z.string(), path: z.string(), size_bytes: bytes, sha256: z.string() })),
  cache_dir: z.string(),
  warnings: z.array(z.string()),
  /** The planner's verdict for this machine with the config's settings. */
  fit: FitVerdictSchema,
});
