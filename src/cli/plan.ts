import { defineCommand } from "citty";
import { renderPlan } from "../plan/render.ts";
import { buildPlanReport } from "../plan/report.ts";
import { Core } from "../server/core.ts";
import { configArg, jsonArg } from "./args.ts";

export default defineCommand({
  meta: { name: "plan", description: "Preview how the model would be launched, and why" },
  args: { ...configArg, ...jsonArg },
  run: async ({ args }) => {
    const core = new Core({ configPath: args.config, cwd: process.cwd() });
    const report = await buildPlanReport(core);
    const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
    process.stdout.write(args.json ? JSON.stringify(report, null, 2) + "\n" : renderPlan(report, color));
    return 0;
  },
});
