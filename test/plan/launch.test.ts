import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { PLAN_DIALECT, renderArgv } from "../../src/plan/argv.ts";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { type PlanDeps, planLaunch } from "../../src/plan/launch.ts";
import { renderPlan } from "../../src/plan/render.ts";
import { buildPlanReport } from "../../src/plan/report.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const HW: HardwareSnapshot = cpuOnlyMachine();
const deps: PlanDeps = { readModel: defaultPlanDeps.readModel, probe: async () => HW };

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof CoreError) return err.code;
    throw err;
  }
  return "none";
}

describe("planLaunch and the plan report", () => {
  test("the supervisor contract: argv without host/port/key, slots, per-slot context", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", llama7b());
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model:\n  path: ./m.gguf\n  max_tokens: 512\nllama:\n  parallel: 2\n  extra_args: [--foo]\n",
    );
    const { config } = loadConfig("config.yaml", dir.path);
    const launch = await planLaunch(config, deps);
    expect(launch.slots).toBe(2);
    expect(launch.model_path).toBe(join(dir.path, "m.gguf"));
    expect(launch.max_tokens).toBe(512);
    expect(launch.extra_args).toEqual(["--foo"]);
    expect(launch.model_bytes).toBeGreaterThan(0);
    const argv = renderArgv(launch, PLAN_DIALECT);
    expect(argv[argv.indexOf("-c") + 1]).toBe(String(launch.context_per_slot * 2));
    expect(argv.at(-1)).toBe("--foo");
    for (const f of ["--host", "--port", "--api-key"]) expect(argv).not.toContain(f);

    const report = await buildPlanReport(config, deps);
    expect(report.plan.argv).toEqual(argv);
    const text = renderPlan(report, false);
    expect(text).toContain("cpu");
    expect(text).toContain("█");
    expect(text).toContain("-np 2");
    expect(text).not.toContain("\u001b[");
  });

  test("a GGUF's own text never drives the terminal: its name and architecture are shown escaped", async () => {
    using dir = tmpdir();
    const spec = llama7b();
    // A file from anywhere on the hub: an OSC title, a screen clear and a forged line.
    spec.metadata["general.name"] = "\u001b]0;owned\u0007evil\nWarnings";
    spec.metadata["general.architecture"] = "ll\u001b[2Jama\u009b";
    writeGguf(dir.path, "m.gguf", spec);
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./m.gguf\n");
    const { config } = loadConfig("config.yaml", dir.path);
    const report = await buildPlanReport(config, deps);
    expect(report.model.name).toBe("\u001b]0;owned\u0007evil\nWarnings");
    for (const color of [false, true]) {
      const text = renderPlan(report, color);
      // Colour's own escapes are CSI sequences the renderer writes: none comes from the file.
      expect(text.replaceAll(/\u001b\[[0-9;]*m/g, "")).not.toMatch(
        /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/,
      );
      expect(text).toContain("\\u{1b}]0;owned\\u{7}evil\\u{a}Warnings");
      expect(text).toContain("ll\\u{1b}[2Jama\\u{9b}");
    }
  });

  test("errors carry the right codes", async () => {
    using dir = tmpdir();
    // The config loads inside the promise, as it does for the plan method and the supervisor.
    const planWith = async (configPath: string) => planLaunch(loadConfig(configPath, dir.path).config, deps);
    expect(await codeOf(planWith("none.yaml"))).toBe("config_missing");
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./absent.gguf\n");
    expect(await codeOf(planWith("config.yaml"))).toBe("model_missing");
    writeGguf(dir.path, "m.gguf", llama7b());
    writeFileSync(join(dir.path, "c2.yaml"), "model:\n  path: ./m.gguf\nhardware:\n  ram_bytes: 1000000\n");
    expect(await codeOf(planWith("c2.yaml"))).toBe("model_plan_error");
  });

  test("a missing model is model_missing at once, not after the llama-server lookup", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: ./absent.gguf\n");
    const { config } = loadConfig("config.yaml", dir.path);
    // A PATH folder on a network share gone offline: its stat is waited for 30 s (drive-answers.ts).
    let lookedUp = false;
    const hung: PlanDeps = {
      ...deps,
      readModel: async () => {
        throw new CoreError("model_missing", "model file not found");
      },
      findServer: () => {
        lookedUp = true;
        return new Promise(() => {});
      },
    };
    const told = codeOf(planLaunch(config, hung));
    // Only microtasks stand between the model's refusal and its answer: the loop's next turn is later.
    const held = new Promise<string>((r) => setImmediate(() => r("held by the lookup")));
    expect(await Promise.race([told, held])).toBe("model_missing");
    expect(lookedUp).toBe(true);
  });
});
