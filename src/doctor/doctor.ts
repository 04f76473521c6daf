import { delimiter, resolve, sep } from "node:path";
import { llamaServerAsked } from "../config/find-binary-asked.ts";
import type { Config, LoadedConfig } from "../config/schema.ts";
import { defaultPlanDeps, probeAhead } from "../models/local-plan-deps.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { type RunResult, runWithTimeout } from "../plan/probe.ts";
import type { DoctorResult } from "../protocol/doctor.ts";
import { isCoreError } from "../protocol/errors.ts";
import { checkWorkers } from "../rpc/check.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { binaryCheck, type Check, hardwareCheck, mcpChecks, skipped } from "./checks.ts";
import { dataDirCheck } from "./data-dir-check.ts";
import { memoryFoldersCheck } from "./folders-check.ts";
import { modelChecks, readConfiguredModels } from "./model-checks.ts";
import { rpcChecksFrom } from "./rpc-checks.ts";
import { runRecordsCheck } from "./run-records-check.ts";
import { storeCheck } from "./store-check.ts";
import { v01DataCheck } from "./v01-check.ts";

export type { Check, CheckStatus } from "./checks.ts";
export type DoctorReport = DoctorResult;

/** Where doctor reads the config. */
export interface DoctorConfig {
  /** Throws CoreError config_missing / config_invalid. */
  loadedConfig(): LoadedConfig;
}

/** The edges doctor reads through: the plan's (model, probes) and a command runner. */
export interface DoctorDeps extends PlanDeps {
  run(cmd: string, args: string[], timeoutMs: number): Promise<RunResult>;
  /** Whether data_dir's drive answers, asked off the loop (tests: one that never does). */
  drive?: DriveAnswers;
}

/** Diagnosing loads nothing: the shared probe looked at, `initialize`'s read-ahead left to the first chat. */
export const defaultDoctorDeps: DoctorDeps = {
  ...defaultPlanDeps,
  // The binary's own answer, never the listing memo's (plan/listing-memo.ts).
  probe: (binary) => probeAhead.look(binary, true),
  run: runWithTimeout,
};

/**
 * Runs every check; never throws: a failure is a check with status fail. One cause is one
 * failure: without a usable config the checks that read it (binary, the models, data_dir, MCP,
 * plans) are `skip`, not failures against guessed defaults, and only the hardware is probed.
 * Diagnosing creates nothing (see data-dir-check.ts). `stopping`: the core's stop, which ends the
 * database's read (store-check.ts) rather than leave its thread running.
 */
export async function runDoctor(
  source: DoctorConfig,
  deps: DoctorDeps = defaultDoctorDeps,
  stopping?: AbortSignal,
): Promise<DoctorReport> {
  const { check, loaded } = configCheck(source);
  if (!loaded) {
    const because =
      check.data?.code === "config_missing" ? "there is no config file" : "the config is invalid";
    const hardware = hardwareCheck(await deps.probe());
    return report([
      check,
      skipped("binary", because),
      skipped("model", because),
      hardware,
      skipped("data_dir", because),
      skipped("store", because),
      skipped("plan", because),
    ]);
  }
  const config: Config = loaded.config;
  const rpc = config.llama.rpc;
  const server = await llamaServerAsked(config);
  // The checks of data_dir call the file system on the loop (a stat, a listing): on a dead network
  // mount each held the core for good, ping and cancel with it. Its drive is asked first, bounded.
  const drive = deps.drive ?? drives;
  // One cause, one failure: with data_dir itself unusable (a file, a link loop, not writable, its
  // drive silent) the database and pid records under it are skipped, not "ok, none yet".
  const dataDir = drive
    .answers(config.app.data_dir)
    .then((ok) => (ok ? dataDirCheck(config) : dataDirLate(config.app.data_dir, drive.waitMs)));
  const usable = dataDir.then((c) => !dataDirItselfFails(c, config.app.data_dir));
  const unusable = "the data directory cannot be used";
  const [binary, reads, hardware, workers, folders, store, records] = await Promise.all([
    binaryCheck(config, deps.run),
    readConfiguredModels(
      config,
      (path, key) => deps.readModel(path, key),
      deps.findProjector ? (setting, model, key) => deps.findProjector!(setting, model, key) : undefined,
    ),
    deps.probe(server),
    // Asked once: each worker's check and the plan (which counts the workers that answered).
    rpc.length > 0 ? (deps.workers ?? checkWorkers)(rpc, server ? { server } : {}) : Promise.resolve([]),
    memoryFoldersCheck(config, loaded.file),
    // Off the main loop, beside the probes: a database of several GB takes seconds to read.
    usable.then((ok) =>
      ok ? storeCheck(config, undefined, { signal: stopping }) : skipped("store", unusable),
    ),
    usable.then((ok) => (ok ? runRecordsCheck(config) : skipped("run_records", unusable))),
  ]);
  // Every configured model, each planned as if alone (docs/doctor.md, "Several models").
  const models = modelChecks(reads, hardware, workers);
  return report([
    check,
    binary,
    ...models.files,
    hardwareCheck(hardware),
    await dataDir,
    records,
    store,
    // Present only where 0.1's files are (docs/doctor.md, `v01_data`).
    ...((await usable) ? [v01DataCheck(config)].filter((c) => c !== undefined) : []),
    ...folders,
    ...mcpChecks(config, await mcpLate(config, drive)),
    ...rpcChecksFrom(config, workers),
    ...models.plans,
    ...models.pinned,
  ]);
}

function report(checks: Check[]): DoctorReport {
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
    const data = { code: err.code, ...err.data };
    return {
      check: { id: "config", status: "fail", message: err.message, fix: configFix(err), data },
      loaded: null,
    };
  }
}

/**
 * What to do about a config that cannot be used. Only a schema problem names a key: a YAML
 * syntax error names a line, and a file that is a folder, too big or unreadable names neither,
 * where "the key named in the message" sent the reader looking for one that is not there.
 */
function configFix(err: { code: string; data?: unknown }): string {
  if (err.code === "config_missing")
    return "create a config.yaml (see config.example.yaml) or pass --config FILE";
  const where = (err.data ?? {}) as { key?: unknown; line?: unknown };
  if (typeof where.key === "string") return "correct the key named in the message";
  if (typeof where.line === "number") return "correct the file at the line named in the message";
  return "point --config at a readable YAML file of at most 1 MiB (the message says what this one is)";
}

/** data_dir's drive did not answer a stat within its wait (a network share gone, a disk asleep). */
function dataDirLate(dir: string, waitMs: number): Check {
  return {
    id: "data_dir",
    status: "fail",
    message: `data directory ${dir} did not answer within ${waitMs / 1000} s (a network share offline, or a drive that hangs)`,
    fix: "bring its drive or share back online, or set app.data_dir to a folder on a local disk",
    data: { path: dir, problem: "ETIMEDOUT" },
  };
}

/**
 * Whether data_dir's check failed over the folder itself (or the one above it), not over a folder
 * the core writes in there (`data.at` below it: logs/, run/…), where the database is still read.
 */
function dataDirItselfFails(check: Check, dir: string): boolean {
  if (check.status !== "fail") return false;
  const at = (check.data as { at?: unknown } | undefined)?.at;
  return typeof at !== "string" || !resolve(at).startsWith(resolve(dir) + sep);
}

/**
 * The MCP servers whose command or cwd did not answer a stat within its wait. A bare command is
 * looked for in each PATH folder, stat'ed in turn on the loop (mcpChecks' lookup): each is asked.
 */
async function mcpLate(config: Config, drive: DriveAnswers): Promise<Set<string>> {
  const asked = await Promise.all(
    config.mcp_servers.map(async (s) => {
      const isPath = s.command.includes("/") || s.command.includes("\\");
      const searched = (s.env?.PATH ?? process.env.PATH ?? "").split(delimiter).filter((d) => d !== "");
      const paths = [...(isPath ? [s.command] : searched), ...(s.cwd !== undefined ? [s.cwd] : [])];
      const answers = await Promise.all(paths.map((p) => drive.answers(p)));
      return answers.every(Boolean) ? null : s.name;
    }),
  );
  return new Set(asked.filter((n): n is string => n !== null));
}
