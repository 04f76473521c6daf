import { defineCommand } from "citty";
import { planReportWithHub } from "../models/plan-with-hub.ts";
import { renderPlan } from "../plan/render.ts";
import { CoreError } from "../protocol/errors.ts";
import { CoreServices } from "../server/services.ts";
import { terminalJson } from "../util/terminal-text.ts";
import { configArg, jsonArg } from "./args.ts";
import { colorFor, writeDocument } from "./output.ts";

export default defineCommand({
  meta: { name: "plan", description: "Preview how the model would be launched, and why" },
  args: {
    ...configArg,
    ...jsonArg,
    model: {
      type: "string",
      description:
        "plan this model instead of model.path: a configured name (default, a models entry), a .gguf path, or hf:org/name[:QUANT] (read from the hub's header when not pulled)",
      valueHint: "MODEL",
    },
  },
  run: async ({ args }) => {
    // As the method's params refuse it: an empty value would be read as the working folder.
    if (args.model === "")
      throw new CoreError(
        "invalid_request",
        "--model is empty: give a configured name, a .gguf path or hf:org/name",
        {
          field: "model",
        },
      );
    const services = new CoreServices({ configPath: args.config, cwd: process.cwd() });
    const report = await planReportWithHub(services, { model: args.model, base: process.cwd() });
    writeDocument(args.json ? `${terminalJson(report, 2)}\n` : renderPlan(report, colorFor(process.stdout)));
    return 0;
  },
});
