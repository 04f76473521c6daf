import { homedir } from "node:os";
import { z } from "zod";
import { fitVerdictWith } from "../models/fit-verdict.ts";
import { pullModel } from "../models/pull.ts";
import { QuantSchema, RepoFileSchema, RepoIdSchema, RevisionSchema } from "../protocol/model-ref.ts";
import { logger } from "../util/logger.ts";
import { defineMethod } from "./definition.ts";

export const PullParamsSchema = z
  .object({
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

export const FitVerdictSchema = z.object({
  fits: z.boolean().nullable(),
  needed_bytes: z.number().nonnegative().nullable(),
  available_bytes: z.number().nonnegative().nullable(),
  device: z.string().nullable(),
  context_per_slot: z.number().int().positive().nullable(),
  message: z.string(),
});

export const PullResultSchema = z.object({
  repo: z.string(),
  revision: z.string(),
  commit: z.string(),
  /** The snapshot path to put in `model.path` (the first part of a split model). */
  path: z.string(),
  size_bytes: bytes,
  sha256: z.string(),
  files: z.array(z.object({ file: z.string(), path: z.string(), size_bytes: bytes, sha256: z.string() })),
  cache_dir: z.string(),
  warnings: z.array(z.string()),
  /** The planner's verdict for this machine with the config's settings. */
  fit: FitVerdictSchema,
});

/**
 * Downloads a GGUF from the hub into the shared cache (SPEC §8): progress events, resume,
 * verification; cancellable (the partial download is kept for the next pull).
 */
export const pull = defineMethod({
  name: "pull",
  cancellable: true,
  params: PullParamsSchema,
  result: () => PullResultSchema,
  events: () => ({ download_progress: DownloadProgressFields }),
  run: async (params, ctx, services) => {
    const outcome = await pullModel(
      params,
      { env: process.env, home: homedir() },
      {
        signal: ctx.signal,
        progress: (p) => ctx.emit("download_progress", p),
        note: (message) => logger.warn(message),
      },
    );
    const fit = await fitVerdictWith(
      () => services.config(),
      () => services.defaultConfig().config,
      outcome.path,
    );
    return { ...outcome, fit };
  },
});
