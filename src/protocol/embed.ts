import { z } from "zod";
import { ModelRefSchema } from "./model-state.ts";

/** `embed` (docs/protocol.md#embed): text in, one vector per string out. */

/** Strings one request may carry, and the UTF-8 bytes of each. */
export const EMBED_MAX_INPUTS = 2048;
export const EMBED_MAX_INPUT_BYTES = 1024 * 1024;

/**
 * Bytes an answer's vectors may take as JSON: under the 32 MiB lines the typed client reads
 * (client-options.ts `maxLineBytes`), with room for the rest of the answer. 2,048 vectors of
 * 1,024 numbers are some 44 MB, a line the client would drop after all the work.
 */
export const EMBED_MAX_ANSWER_BYTES = 31 * 1024 * 1024;
/** The longest a vector's number is in JSON, its comma included (a float32 as JavaScript writes it: "-0.0000045278379730007146"). */
const NUMBER_BYTES = 27;

/** The most strings one `embed` answers for a model of this many dimensions (docs/protocol.md#embed). */
export function embedMaxInputs(dimensions: number): number {
  return Math.max(1, Math.floor(EMBED_MAX_ANSWER_BYTES / (Math.max(1, dimensions) * NUMBER_BYTES + 3)));
}

/** A string's UTF-8 size is at most 3 bytes per UTF-16 unit: only a long one is measured. */
function tooLong(text: string): boolean {
  return text.length * 3 > EMBED_MAX_INPUT_BYTES && Buffer.byteLength(text, "utf8") > EMBED_MAX_INPUT_BYTES;
}

/**
 * A string or a list of them. The limits are checked here rather than in the union's branches,
 * so the refusal names the string (`input.<i>`) instead of "no branch matched".
 */
const EmbedInputSchema = z.union([z.string(), z.array(z.string())]).superRefine((input, ctx) => {
  const list = typeof input === "string" ? null : input;
  if (list?.length === 0)
    ctx.addIssue({ code: "custom", message: "an empty list: give at least one string" });
  if (list && list.length > EMBED_MAX_INPUTS)
    ctx.addIssue({
      code: "custom",
      message: `${list.length} strings: at most ${EMBED_MAX_INPUTS} in one request`,
    });
  const over = (list ?? [input as string]).findIndex(tooLong);
  if (over >= 0)
    ctx.addIssue({
      code: "custom",
      path: list ? [over] : [],
      message: `longer than ${EMBED_MAX_INPUT_BYTES} bytes of UTF-8 text`,
    });
});

export const EmbedParamsSchema = z.strictObject({
  /** Omitted: memory.embedding_model, else the first `models` entry of kind embedding. */
  model: ModelRefSchema.optional(),
  input: EmbedInputSchema,
});
export type EmbedParams = z.infer<typeof EmbedParamsSchema>;

export const EmbedResultSchema = z.object({
  /** The name, or the path or reference as the request gave it. */
  model: z.string(),
  /** Every vector's length. */
  dimensions: z.number().int().positive(),
  /** One per input string, in order, as llama-server gives them (L2-normalized). */
  embeddings: z.array(z.array(z.number())),
  usage: z.object({ prompt_tokens: z.number().int().nonnegative() }),
});
export type EmbedResult = z.infer<typeof EmbedResultSchema>;
