import { z } from "zod";

/**
 * What a step (or a turn, summed over its steps) cost, from llama-server's own `timings` and
 * `usage` (docs/agent.md#prompt-reuse). Every field is optional: a server that reports less leaves
 * it out.
 */
export const UsageSchema = z.object({
  prompt_tokens: z.number().nonnegative().optional(),
  /** Prompt tokens llama-server took from its cache instead of processing them. */
  cached_tokens: z.number().nonnegative().optional(),
  completion_tokens: z.number().nonnegative().optional(),
  reasoning_tokens: z.number().nonnegative().optional(),
  prompt_ms: z.number().nonnegative().optional(),
  ttft_ms: z.number().nonnegative().optional(),
  tokens_per_s: z.number().nonnegative().optional(),
  /**
   * What images added to the prompts (docs/protocol.md#images): llama-server's prompt tokens with
   * them less the same prompt without them, markers included; absent when no image was sent.
   */
  image_tokens: z.number().nonnegative().optional(),
});
export type Usage = z.infer<typeof UsageSchema>;
