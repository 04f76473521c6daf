import { z } from "zod";

/**
 * `think` (docs/agent.md#thinking-and-structured-output): whether and how much a reasoning model
 * thinks before it answers. The chat param, and the agent's `think` in the config (its default).
 * Here, on the floor below both.
 * - `true` / `false`: thinking on or off (`chat_template_kwargs.enable_thinking`);
 * - `"low"|"medium"|"high"`: on, with that effort (`reasoning_effort`, for templates that read it);
 * - `{budget_tokens: N}`: on, ended after N tokens (`reasoning_budget_tokens`: llama-server then
 *   closes the think block itself and the model answers, test/fixtures/llama-server/transcripts/91d).
 */
/** The largest budget llama-server takes: it reads the field into a 32-bit int and refuses more with a 400. */
export const MAX_BUDGET_TOKENS = 2_147_483_647;

export const ThinkSchema = z.union(
  [
    z.boolean(),
    z.enum(["low", "medium", "high"]),
    z.strictObject({ budget_tokens: z.number().int().nonnegative().max(MAX_BUDGET_TOKENS) }),
  ],
  { error: 'expected true, false, "low", "medium", "high" or {budget_tokens: N}' },
);
export type Think = z.infer<typeof ThinkSchema>;
