import type { Config, LoadedConfig } from "../config/schema.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { defaultPlanDeps } from "../plan/launch.ts";
import type { ModelInfo } from "../plan/model.ts";
import { type RunResult, runWithTimeout } from "../plan/probe.ts";
import { isCoreError } from "../protocol/errors.ts";
import type { DoctorResult } from "../protocol/results.ts";
import {
  binaryCheck,
  type Check,
  dataDirCheck,
  hardwareCheck,
  mcpChecks,
  modelCheck,
  planCheck,
} from "./checks.ts";
import { rpcChecks } from "./rpc-checks.ts";

export type { Check, CheckStatus } from "./checks.ts";
export type DoctorReport = DoctorResult;

/** Where doctor reads the config: the real load, and the defaults it falls back to. */
export interface DoctorConfig {
  /** Throws CoreError config_missing / config_invalid. */
  loadedConfig(): LoadedConfig;
  defaultConfig(): LoadedConfig;
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
export async function runDoctor(
  source: DoctorConfig,
  deps: DoctorDeps = defaultDoctorDeps,
): Promise<DoctorReport> {
  const { check, loaded } = configCheck(source);
  const checks: Check[] = [check];
  const config: Config = (loaded ?? source.defaultConfig()).config;
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
    ...(await rpcChecks(config, deps)),
  );
  const model: ModelInfo | null = "model" in modelResult ? modelResult.model : null;
  checks.push(planCheck(config, model, hardware));
  return { ok: checks.every((c) => c.status !== "fail"), checks };
}

function configCheck(source: DoctorConfig): { check: Check; loaded: LoadedConfig | null } {
  try {
    const loaded = source.loadedConfig();
    if (loaded.warnings.length > 0) {
      const check: Check = {
        id: "config",
        status: "warn",
        message: `config ${loaded.file} is valid, with ${loaded.warnings.length} warning(s): ${loaded.warnings.join("; ")}`,
        fix: "remove or correct the unknown keys",
        data: { file: loaded.file, warnings: loaded.warnings },
      };
      return { check, loaded };
    }
    return {
      check: {
        id: "config",
        status: "ok",
        message: `config ${loaded.file} is valid`,
        data: { file: loaded.file },
      },
      loaded,
    };
  } catch (err) {
    if (!isCoreError(err)) throw err;
    const fix =
      err.code === "config_missing"
        ? "create a config.yaml (see config.example.yaml) or pass --config FILE"
        : "correct the key named in the message";
    const data = { code: err.code, ...err.data };
    return { check: { id: "config", status: "fail", message: err.message, fix, data }, loaded: null };
  }
}
