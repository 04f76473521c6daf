import { z } from "zod";
import { runDoctor } from "../doctor/doctor.ts";
import { defineMethod } from "./types.ts";

export const doctor = defineMethod({
  name: "doctor",
  params: z.object({}).loose(),
  run: async (_params, ctx) => runDoctor(ctx.core),
});
