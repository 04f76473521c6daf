import { CancelParamsSchema, CancelResultSchema } from "../protocol/cancel.ts";
import { defineMethod } from "./definition.ts";

export const cancel = defineMethod({
  name: "cancel",
  params: CancelParamsSchema,
  result: () => CancelResultSchema,
  run: (params, ctx) => ({ cancelled: ctx.cancel(params.request_id) }),
});
