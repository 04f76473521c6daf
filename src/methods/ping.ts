import { z } from "zod";
import { defineMethod } from "./types.ts";

export const ping = defineMethod({
  name: "ping",
  params: z.object({}).loose(),
  run: () => ({ status: "ok" }),
});
