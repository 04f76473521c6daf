import { type DoctorReport, defaultDoctorDeps, runDoctor } from "../doctor/doctor.ts";
import { DoctorParamsSchema, DoctorResultSchema } from "../protocol/doctor.ts";
import { abortable } from "../util/abortable.ts";
import { controlsMarked } from "../util/terminal-text.ts";
import { defineMethod } from "./definition.ts";

export const doctor = defineMethod({
  name: "doctor",
  params: DoctorParamsSchema,
  result: () => DoctorResultSchema,
  // Not cancellable, but its probes (5 s each on a hung binary) must not hold the core's stop:
  // it is answered at once, and the probes still running die with the core (cli/serve-stdio.ts);
  // the database's read on its thread is ended then too (doctor/store-check.ts).
  run: async (_params, ctx, services) =>
    shownReport(await abortable(runDoctor(services, defaultDoctorDeps, ctx.stopping), ctx.stopping)),
});

/**
 * The report as a host shows it: its messages and fixes with control characters marked `?`, as
 * the CLI's view escapes them (a path of the config's spelling or a folder's name carried U+009B,
 * ESC [ to some terminals, raw into a host's window). `data` keeps the exact values.
 */
function shownReport(report: DoctorReport): DoctorReport {
  const checks = report.checks.map((c) => ({
    ...c,
    message: controlsMarked(c.message),
    ...(c.fix === undefined ? {} : { fix: controlsMarked(c.fix) }),
  }));
  return { ...report, checks };
}
