import { z } from "zod";
import { runDoctor } from "../doctor/doctor.ts";
import { DoctorResultSchema } from "../protocol/results.ts";
import { defineMethod } from "./definition.ts";

export const doctor = defineMethod({
  name: "doctor",
  params: z.object({}).loose(),
  result: () => DoctorResultSchema,
  run: async (_params, _ctx, services) => runDoctor(services),
});
