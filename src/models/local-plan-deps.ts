import { homedir } from "node:os";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { ListingMemo } from "../plan/listing-memo.ts";
import { realMemoEdges } from "../plan/listing-memo-fs.ts";
import { ModelMemo } from "../plan/model-memo.ts";
import { probeHardware } from "../plan/probe.ts";
import { ProbeAhead } from "../plan/probe-ahead.ts";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import { checkWorkers } from "../rpc/check.ts";
import { findProjector } from "./find-projector.ts";
import { hubCacheDir } from "./hf-cache.ts";
import { resolveModelPath, withPullAgain } from "./resolve.ts";

/**
 * The plan's edges as the core runs them, offline. The plan is a floor below the models, so
 * this is where `hf:org/name:QUANT` meets it: resolved from the Hugging Face cache before each
 * read, the one place plan, chat and doctor read the model through (model_missing names the
 * pull command when absent).
 */

/** The process's memo: every start, restart and wake plans again, `initialize` reads ahead. */
export const modelMemo = new ModelMemo((path, key) => resolveModelPath(path, process.env, undefined, key), {
  // The cache an `hf:` path is resolved in may be on a network drive: its ref and parts are read
  // synchronously (a few small reads), its snapshot listed off the loop.
  folderOf: (path) =>
    path.startsWith(HF_PREFIX) ? hubCacheDir(process.env, process.env.HOME || homedir()) : null,
});

/** A CPU build's `(none)` across core starts; serve-stdio turns it on (server/chat-read-ahead.ts). */
export const listingMemo = new ListingMemo(realMemoEdges, (binary, going) =>
  probeAhead.recheck(binary, going),
);

/** The process's probe made ahead: `initialize` starts it, the first plan takes it. */
const answered = new WeakSet<HardwareSnapshot>();
export const probeAhead = new ProbeAhead(
  async (binary, ask) => {
    const hooks = listingMemo.hooks(ask);
    const snapshot = await probeHardware(undefined, binary, hooks);
    if (hooks.answered) answered.add(snapshot);
    return snapshot;
  },
  undefined,
  (snapshot) => answered.has(snapshot),
);

export const defaultPlanDeps: PlanDeps = {
  probe: (binary) => probeAhead.take(binary),
  readModel: (path, key) =>
    modelMemo.read(path, key).catch((err) => Promise.reject(withPullAgain(path, err))),
  workers: (workers, options) => checkWorkers(workers, options),
  findProjector: (setting, model, key) => findProjector(setting, model, key),
};
