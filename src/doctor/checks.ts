import { accessSync, constants, statSync } from "node:fs";
import { access, readdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { cwdProblem } from "../agent/mcp/child.ts";
import { commandLineOf } from "../agent/mcp/stderr-tail.ts";
import { findLlamaServerAsked } from "../config/find-binary-asked.ts";
import type { Config } from "../config/schema.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import { LIST_DEVICES_PROBE, type RunResult } from "../plan/probe.ts";
import { formatBytes } from "../plan/render.ts";
import { resolvedCommand } from "../platform/windows-command.ts";
import type { DoctorCheck } from "../protocol/doctor.ts";
import { childModeOf } from "../runtime/child-mode.ts";
import { withoutArgSecrets } from "../util/arg-secrets.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { oneLanedAtATime } from "../util/one-at-a-time.ts";
import { shellWord } from "../util/shell-word.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { within } from "../util/within.ts";
import { childModeNote } from "./child-mode-note.ts";
import { missingLlamaServerFix } from "./llama-server-source.ts";

/** One diagnostic: the protocol's DoctorCheckSchema is its one definition. */
export type Check = DoctorCheck;
export type CheckStatus = Check["status"];

/** One function per doctor check; each returns a Check and never throws. */

export const VERSION_TIMEOUT_MS = 5000;

export async function binaryCheck(
  config: Config,
  run: (cmd: string, args: string[], timeoutMs: number) => Promise<RunResult>,
): Promise<Check> {
  // Each place asked of its drive off the loop first (config/find-binary-asked.ts): one on a
  // network share gone offline held the whole core, ping too, through a doctor.
  const found = await findLlamaServerAsked(config);
  if ("tried" in found) {
    const late = found.late ? `; not looked at from ${found.late}` : "";
    return {
      id: "binary",
      status: "fail",
      message: `llama-server not found (tried ${found.tried.length > 4 ? `${found.tried.slice(0, 4).join(", ")}, …` : found.tried.join(", ")})${late}`,
      fix: missingLlamaServerFix(process.platform, process.arch, dirname(process.execPath)),
      data: { code: "binary_missing", tried: found.tried },
    };
  }
  const path = found.path;
  if (process.platform !== "win32") {
    try {
      await access(path, constants.X_OK);
      if (((await stat(path)).mode & 0o111) === 0) throw new Error("no execute bit");
    } catch {
      return {
        id: "binary",
        status: "fail",
        message: `${path} is not executable`,
        fix: `chmod +x ${shellWord(path)}`,
        data: { code: "binary_missing", path },
      };
    }
  }
  const r = await run(path, ["--version"], VERSION_TIMEOUT_MS);
  const backends = await backendsBeside(path);
  if (r.kind === "timeout") {
    return {
      id: "binary",
      status: "fail",
      message: `${path} did not answer --version within ${VERSION_TIMEOUT_MS / 1000} s`,
      fix: "check that it is a llama-server build for this OS and CPU",
      data: { path },
    };
  }
  if (r.kind !== "exit") {
    const why = r.kind === "error" ? r.message : "not found";
    return {
      id: "binary",
      status: "fail",
      message: `${path} could not be run: ${why}`,
      fix: "check that it is a llama-server build for this OS and CPU",
      data: { path },
    };
  }
  // llama-server prints its version to stderr.
  const text = `${r.stderr}\n${r.stdout}`;
  const version = /version:\s*(.+)/.exec(text)?.[1]?.trim() ?? null;
  if (r.code !== 0 || !version) {
    return {
      id: "binary",
      status: "fail",
      message: `${path} --version exited ${r.code} without a llama-server version`,
      fix: "check that llama.binary points at llama-server, not another program",
      // Cut between characters: half an emoji makes the report a line a strict parser refuses.
      data: { path, output: text.trim().slice(0, wholeCharCut(text.trim(), 300)) },
    };
  }
  for (const m of text.matchAll(/load_backend: loaded (\S+) backend/g)) backends.add(m[1]!);
  for (const m of text.matchAll(/ggml_(cuda|vulkan|metal|sycl|hip)_init/gi))
    backends.add(m[1]!.toUpperCase());
  const builtFor = /built with (.+)/.exec(text)?.[1]?.trim() ?? null;
  const list = [...backends];
  const childMode = await childModeOf(path, process.env);
  return {
    id: "binary",
    status: "ok",
    message: `${path}: ${version}${list.length ? `, backends ${list.join(", ")}` : ""}; ${childModeNote(childMode)}`,
    data: { path, version, built_with: builtFor, backends: list, child_mode: childMode },
  };
}

/**
 * Dynamic backends shipped beside the binary (libggml-cuda.so, ggml-vulkan.dll…). Listed off the
 * loop and waited for no longer than a drive's stat: its folder's stat answered, but an NFS client
 * answers that from cached attributes, and a listing of it can hang with its server gone. In the
 * drives' lanes (util/drive-answers.ts `laned`): a hung one holds a file thread for good, and
 * started outside them, hung listings of several folders took every thread the core reads with.
 */
export async function backendsBeside(
  binary: string,
  list: (folder: string) => Promise<string[]> = readdir,
  answers: DriveAnswers = drives,
): Promise<Set<string>> {
  const out = new Set<string>();
  try {
    const folder = dirname(binary);
    const names = await within(
      listing(folder, answers, () => list(folder).catch(() => [] as string[])),
      answers.waitMs,
      "late" as const,
    );
    for (const f of names === "late" ? [] : names) {
      const m = /^(?:lib)?ggml-([a-z0-9]+)(?:-[\w]+)?\.(?:so|dll|dylib)$/i.exec(f);
      if (m && !["base"].includes(m[1]!.toLowerCase())) out.add(m[1]!.toUpperCase());
    }
  } catch {
    // unreadable folder: no extra information
  }
  return out;
}

/** The listings out, by folder, one at a time, in the drives' lanes (util/one-at-a-time.ts). */
const listing = oneLanedAtATime<string[]>();

export function hardwareCheck(hw: HardwareSnapshot): Check {
  const gpus = hw.gpus.map(
    (g) =>
      `${g.name} (${g.device ? `${g.device}, ` : ""}${g.backend}, ${formatBytes(g.free_bytes)} free of ${formatBytes(g.total_bytes)}${g.driver ? `, driver ${g.driver}` : ""})`,
  );
  const cores = `${hw.cpu.physical ?? "?"} cores/${hw.cpu.logical} threads`;
  const ram = `${formatBytes(hw.ram.available_bytes ?? 0)} of ${formatBytes(hw.ram.total_bytes)} RAM available`;
  const problems = hw.probes.filter((p) => p.status === "timeout" || p.status === "error");
  const unused = hw.gpus_unused ?? [];
  const message = `${hw.cpu.model ?? "CPU"} ${cores}${hw.cpu.flags.length ? ` [${hw.cpu.flags.join(" ")}]` : ""}; ${ram}; ${gpus.length ? gpus.join("; ") : "no GPU"}`;
  const data = { probes: hw.probes };
  if (problems.length === 0 && unused.length === 0) return { id: "hardware", status: "ok", message, data };
  return {
    id: "hardware",
    status: "warn",
    message: [message, ...problems.map((p) => `${p.id}: ${p.message}`), ...unused].join("; "),
    fix: hardwareFix(problems, unused),
    data,
  };
}

/** What to do about a probe that failed, or a GPU the configured llama-server cannot use. */
function hardwareFix(problems: readonly { id: string }[], unused: readonly string[]): string {
  const fixes: string[] = [];
  if (unused.length > 0)
    fixes.push(
      "put a llama-server build for that GPU beside local-ai, or point llama.binary at one (CUDA or Vulkan for NVIDIA, ROCm or Vulkan for AMD, SYCL or Vulkan for Intel)",
    );
  if (problems.some((p) => p.id !== LIST_DEVICES_PROBE))
    fixes.push(
      "a GPU driver that hangs or misbehaves: check the driver installation (the plan treats that GPU as absent)",
    );
  if (problems.some((p) => p.id === LIST_DEVICES_PROBE))
    fixes.push(
      "llama-server could not list its devices (a build older than --list-devices, or a GPU backend that hangs as it starts): the plan goes by the vendor tools' GPUs",
    );
  return fixes.join("; ");
}

/**
 * `late`: the servers whose command path or cwd did not answer a stat off the loop (doctor.ts
 * asks first): this check's own stats of them, on the loop, held the core for good on a dead share.
 */
export function mcpChecks(config: Config, late: ReadonlySet<string> = new Set()): Check[] {
  return config.mcp_servers.map((s) => {
    if (late.has(s.name))
      return {
        id: `mcp:${s.name}`,
        status: "fail" as const,
        message: `${s.name}: its command, a folder of its PATH, or its cwd did not answer (a network share offline, or a drive that hangs)`,
        fix: `bring that drive or share back online, or correct mcp_servers[${s.name}]`,
        data: { problem: "ETIMEDOUT" },
      };
    const isPath = s.command.includes("/") || s.command.includes("\\");
    const resolved = isPath ? s.command : resolvedCommand(s.command, s.env ?? {});
    let ok = false;
    if (resolved) {
      try {
        ok = statSync(resolved).isFile();
        if (ok && process.platform !== "win32") accessSync(resolved, constants.X_OK);
      } catch {
        ok = false;
      }
    }
    const badCwd = ok && s.cwd !== undefined ? cwdProblem(s.cwd) : null;
    // A whole command line written into `command` (`npx server --api-key sk-…`), as not found,
    // with its credentials redacted (util/arg-secrets.ts): the report is pasted into issues.
    const shown = withoutArgSecrets(s.command, commandLineOf(s));
    if (badCwd)
      return {
        id: `mcp:${s.name}`,
        status: "fail" as const,
        message: `${s.name}: ${badCwd}`,
        fix: `create it or correct mcp_servers[${s.name}].cwd`,
        data: { command: resolved, cwd: s.cwd },
      };
    return ok
      ? {
          id: `mcp:${s.name}`,
          status: "ok" as const,
          message: `${s.name}: ${resolved}`,
          data: { command: resolved },
        }
      : {
          id: `mcp:${s.name}`,
          status: "fail" as const,
          message: `${s.name}: command ${shown} ${resolved ? "is not an executable file" : isPath ? "does not exist" : "is not on PATH"}`,
          fix: `install it or correct mcp_servers[${s.name}].command`,
          data: { command: shown },
        };
  });
}

/** A check not run because one it depends on failed: that failure is the one to fix. */
export function skipped(id: string, because: string): Check {
  return { id, status: "skip", message: `not checked: ${because}` };
}
