import { runDoctor } from "../doctor/doctor.ts";
import { DoctorParamsSchema, DoctorResultSchema } from "../protocol/doctor.ts";
import { defineMethod } from "./definition.ts";

export const doctor = defineMethod({
  name: "doctor",
  params: DoctorParamsSchema,
  result: () => DoctorResultSchema,
  run: async (_params, _ctx, services) => runDoctor(services),
});
