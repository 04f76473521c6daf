import { z } from "zod";
import { RequestIdSchema } from "../protocol/messages.ts";
import { defineMethod } from "./types.ts";

export const CancelParamsSchema = z.object({
  /** The id of the chat to cancel; optional only while exactly one chat is active. */
  request_id: RequestIdSchema.optional(),
});

export const cancel = defineMethod({
  name: "cancel",
  params: CancelParamsSchema,
  run: async (params, ctx) => ({ cancelled: ctx.cancel(params.request_id) }),
});
