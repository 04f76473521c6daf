import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { exchange } from "./host-tools.ts";
import type { HostPlan, Msg, PathsObservation } from "./observations.ts";

/**
 * Windows' path spellings as a host gives them: one models folder spelled two ways (case, `/`,
 * `.\`) is one `folders` entry; a pipe's or a device's name given as a config's or a document's
 * path is refused by its spelling. No pipe is served here: the refusal must come from the name
 * alone (its message says device or pipe, not a file that is missing), and a pipe server left
 * listening would outlive the scenario.
 */
export async function paths(plan: HostPlan): Promise<PathsObservation> {
  const pipe = `\\\\.\\pipe\\local-ai-suite-${process.pid}`;
  const dir = join(plan.emptyDir, "..", "Paths Stack");
  mkdirSync(dir, { recursive: true });
  // model.path's folder is the config's, spelled otherwise: upper case, `/`, `.\`.
  const spelled = `${dir.toUpperCase().replaceAll("\\", "/")}/./m.gguf`;
  writeFileSync(join(dir, "config.yaml"), `model:\r\n  path: '${spelled}'\r\n`);
  writeFileSync(join(dir, "pipe.yaml"), `model:\r\n  path: '${pipe}'\r\n`);
  writeFileSync(join(dir, "nul-model.yaml"), `model:\r\n  path: 'C:\\x\\NUL.gguf'\r\n`);
  const exitCodes: (number | null)[] = [];
  const models = await listedBy(plan, dir, "config.yaml", exitCodes);
  const pipeConfig = await listedBy(plan, dir, "pipe.yaml", exitCodes);
  const nulConfig = await listedBy(plan, dir, "nul-model.yaml", exitCodes);
  await using core = spawnCore({ binary: plan.core, cwd: dir, args: ["--config", join(dir, "config.yaml")] });
  const document = await asked(core, "documents.add", { user_id: "u", path: pipe });
  const exported = await asked(core, "sessions.export", { session_id: "s", format: "json", path: pipe });
  return {
    scenario: "paths",
    dir,
    folders: models?.result?.folders ?? models,
    pipeConfig,
    nulConfig,
    document,
    exported,
    exitCodes: [...exitCodes, await shutDown(core)],
  };
}

type Core = ReturnType<typeof spawnCore>;

async function asked(core: Core, method: string, params: unknown): Promise<Msg | null> {
  return (await exchange(core, { id: method, method, params })).terminal;
}

/** Shut down and waited for, as a host ends a core: nothing of the scenario outlives it. */
async function shutDown(core: Core): Promise<number | null> {
  await exchange(core, { id: "shutdown", method: "shutdown" });
  return core.exited(15_000).catch(() => null);
}

async function listedBy(plan: HostPlan, dir: string, config: string, exitCodes: (number | null)[]) {
  await using core = spawnCore({ binary: plan.core, cwd: dir, args: ["--config", join(dir, config)] });
  const models = (await exchange(core, { id: "models", method: "models" })).terminal;
  exitCodes.push(await shutDown(core));
  return models;
}
