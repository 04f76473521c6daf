import { z } from "zod";
import { RequestIdSchema } from "./messages.ts";

/** `cancel`: stops an in-flight chat (or warmup, pull); answered before the next line is read. */
export const CancelParamsSchema = z.object({
  /** The id of the chat to cancel; optional only while exactly one chat is active. */
  request_id: RequestIdSchema.optional(),
});

export const CancelResultSchema = z.object({ cancelled: z.boolean() });
export type CancelResult = z.infer<typeof CancelResultSchema>;
