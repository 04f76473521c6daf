import { z } from "zod";
import { ChatMessageSchema } from "../protocol/chat-message.ts";

/** The state of an unfinished turn (L2 checkpoint), enough to resume it without redoing tools. */
export const CheckpointSchema = z.object({
  version: z.literal(1),
  trace_id: z.string(),
  user_input: z.string(),
  agent: z.string(),
  /** The next step to run. */
  step: z.number().int().nonnegative(),
  parse_errors: z.number().int().nonnegative(),
  best_text: z.string(),
  /** Messages this turn added after the history (user input first). */
  turn: z.array(ChatMessageSchema),
  /** An edit or a regenerate: the session's messages from this seq on are replaced by the turn. */
  replace_from_seq: z.number().int().nonnegative().optional(),
  /**
   * What the step being run had streamed when its request failed (the server died, a cancel):
   * its reasoning and text so far, kept for the host to see; the step runs again on resume.
   */
  partial: z
    .object({ step: z.number().int().nonnegative(), reasoning: z.string(), content: z.string() })
    .optional(),
  updated_at: z.string(),
});
export type Checkpoint = z.infer<typeof CheckpointSchema>;
