import { defineCommand } from "citty";
import { renderPlan } from "../plan/render.ts";
import { buildPlanReport } from "../plan/report.ts";
import { CoreServices } from "../server/services.ts";
import { configArg, jsonArg } from "./args.ts";
import { colorFor } from "./output.ts";

export default defineCommand({
  meta: { name: "plan", description: "Preview how the model would be launched, and why" },
  args: { ...configArg, ...jsonArg },
  run: async ({ args }) => {
    const services = new CoreServices({ configPath: args.config, cwd: process.cwd() });
    const report = await buildPlanReport(services.config());
    process.stdout.write(
      args.json ? JSON.stringify(report, null, 2) + "\n" : renderPlan(report, colorFor(process.stdout)),
    );
    return 0;
  },
});
