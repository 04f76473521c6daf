import { defineCommand } from "citty";
import { runDoctor } from "../doctor/doctor.ts";
import { renderDoctor, renderDoctorJson } from "../doctor/render.ts";
import { CoreServices } from "../server/services.ts";
import { configArg, jsonArg } from "./args.ts";
import { colorFor, writeDocument } from "./output.ts";

export default defineCommand({
  meta: { name: "doctor", description: "Diagnose the setup; exit 1 when any check fails" },
  args: { ...configArg, ...jsonArg },
  run: async ({ args }) => {
    const services = new CoreServices({ configPath: args.config, cwd: process.cwd() });
    const report = await runDoctor(services);
    writeDocument(args.json ? renderDoctorJson(report) : renderDoctor(report, colorFor(process.stdout)));
    return report.ok ? 0 : 1;
  },
});
