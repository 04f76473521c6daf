import { CancelParamsSchema } from "../protocol/chat.ts";
import { defineMethod } from "./types.ts";

export const cancel = defineMethod({
  name: "cancel",
  params: CancelParamsSchema,
  run: (params, ctx) => ({ cancelled: ctx.cancel(params.request_id) }),
});
