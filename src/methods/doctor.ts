import { defaultDoctorDeps, runDoctor } from "../doctor/doctor.ts";
import { DoctorParamsSchema, DoctorResultSchema } from "../protocol/doctor.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";

export const doctor = defineMethod({
  name: "doctor",
  params: DoctorParamsSchema,
  result: () => DoctorResultSchema,
  // Not cancellable, but its probes (5 s each on a hung binary) must not hold the core's stop:
  // it is answered at once, and the probes still running die with the core (cli/serve-stdio.ts);
  // the database's read on its thread is ended then too (doctor/store-check.ts).
  run: async (_params, ctx, services) =>
    abortable(runDoctor(services, defaultDoctorDeps, ctx.stopping), ctx.stopping),
});
