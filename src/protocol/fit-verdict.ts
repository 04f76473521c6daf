import { z } from "zod";

/**
 * "Would this GGUF run on this machine with the config's settings?": the planner's own answer
 * (src/models/fit-verdict.ts), as `pull` returns it and `models` lists it. A model that does
 * not fit says which device is short and by how much.
 */
export const FitVerdictSchema = z.object({
  /** null when no verdict could be reached: the file could not be read (the message says why). */
  fits: z.boolean().nullable(),
  /** What the plan needs on the binding device (fits), or on the first short one (does not). */
  needed_bytes: z.number().nonnegative().nullable(),
  available_bytes: z.number().nonnegative().nullable(),
  device: z.string().nullable(),
  context_per_slot: z.number().int().positive().nullable(),
  message: z.string(),
});
export type FitVerdict = z.infer<typeof FitVerdictSchema>;
