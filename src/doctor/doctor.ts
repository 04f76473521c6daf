import { isCoreError } from "../protocol/errors.ts";
import type { Core } from "../server/core.ts";

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

/** Runs every check; never throws: a failure is a check with status fail. */
export async function runDoctor(core: Core): Promise<DoctorReport> {
  const checks: Check[] = [configCheck(core)];
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
