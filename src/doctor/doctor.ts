import type { Config } from "../config/schema.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { defaultPlanDeps } from "../plan/launch.ts";
import type { ModelInfo } from "../plan/model.ts";
import { type RunResult, runWithTimeout } from "../plan/probe.ts";
import { isCoreError } from "../protocol/errors.ts";
import type { Core } from "../server/core.ts";
import { binaryCheck, dataDirCheck, hardwareCheck, mcpChecks, modelCheck, planCheck } from "./checks.ts";

export type CheckStatus = "ok" | "warn" | "fail";

export interface Check {
  id: string;
  status: CheckStatus;
  message: string;
  /** What to do about it; absent when nothing needs doing. */
  fix?: string;
  data?: Record<string, unknown>;
}

export interface DoctorReport {
  ok: boolean;
  checks: Check[];
}

/** The edges doctor reads through: the plan's (model, probes) and a command runner. */
export interface DoctorDeps extends PlanDeps {
  run(cmd: string, args: string[], timeoutMs: number): Promise<RunResult>;
}

export const defaultDoctorDeps: DoctorDeps = { ...defaultPlanDeps, run: runWithTimeout };

/**
 * Runs every check; never throws: a failure is a check with status fail. Without a usable
 * config the remaining checks run against the defaults, so one look shows everything.
 */
export async function runDoctor(core: Core, deps: DoctorDeps = defaultDoctorDeps): Promise<DoctorReport> {
  const checks: Check[] = [configCheck(core)];
  const config: Config = core.configOrDefaults().config;
  const [binary, modelResult, hardware] = await Promise.all([
    binaryCheck(config, deps.run),
    deps.readModel(config.model.path).then(
      (model) => ({ model }),
      (error: unknown) => ({ error }),
    ),
    deps.probe(),
  ]);
  checks.push(
    binary,
    modelCheck(modelResult),
    hardwareCheck(hardware),
    dataDirCheck(config),
    ...mcpChecks(config),
  );
  const model: ModelInfo | null = "model" in modelResult ? modelResult.model : null;
  checks.push(planCheck(config, model, hardware));
  return { ok: checks.every((c) => c.status !== "fail"), checks };
}

function configCheck(core: Core): Check {
  try {
    const loaded = core.config();
    if (loaded.warnings.length > 0) {
      return {
        id: "config",
        status: "warn",
        message: `config ${loaded.file} is valid, with ${loaded.warnings.length} warning(s): ${loaded.warnings.join("; ")}`,
        fix: "remove or correct the unknown keys",
        data: { file: loaded.file, warnings: loaded.warnings },
      };
    }
    return {
      id: "config",
      status: "ok",
      message: `config ${loaded.file} is valid`,
      data: { file: loaded.file },
    };
  } catch (err) {
    if (!isCoreError(err)) throw err;
    const fix =
      err.code === "config_missing"
        ? "create a config.yaml (see config.example.yaml) or pass --config FILE"
        : "correct the key named in the message";
    return { id: "config", status: "fail", message: err.message, fix, data: { code: err.code, ...err.data } };
  }
}
