import { homedir } from "node:os";
import type { PlanConfig } from "../plan/planner.ts";
import { probeHardware } from "../plan/probe.ts";
import type { FitVerdict } from "../protocol/fit-verdict.ts";
import type { ModelRef } from "../protocol/model-ref.ts";
import { fitVerdict } from "./fit-verdict.ts";
import type { Env } from "./hf-cache.ts";
import { type RemoteDeps, type RemoteModel, readRemoteModel } from "./hub-header.ts";
import { hubAccess } from "./hub-listing.ts";

/** A model on the hub and the verdict on it, before any download. */
export interface RemoteFit extends Omit<RemoteModel, "model"> {
  architecture: string;
  parameters: number;
  fit: FitVerdict;
}

/**
 * Will it fit, before any download: the hub's header, this machine, the config's settings.
 * (`pull` itself judges the file it has downloaded, with the same judge.)
 */
export async function remoteFit(
  ref: ModelRef,
  config: PlanConfig,
  env: Env = process.env,
  deps: RemoteDeps = {},
): Promise<RemoteFit> {
  const access = hubAccess(env, deps.home ?? (env.HOME || homedir()), deps.fetch);
  const [remote, hardware] = await Promise.all([
    readRemoteModel(ref, access, deps.signal),
    (deps.probe ?? probeHardware)(),
  ]);
  const { model, ...rest } = remote;
  return {
    ...rest,
    architecture: model.architecture,
    parameters: model.parameters,
    fit: fitVerdict(model, hardware, config),
  };
}
