import { homedir } from "node:os";
import type { PlanDeps } from "../plan/launch.ts";
import { type MemoOptions, statAnswered } from "../plan/model-memo.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import { HF_PREFIX, parseHfModelPath, pullCommand } from "../protocol/model-ref.ts";
import { answersFor } from "../util/drive-answers.ts";
import { type Env, hubCacheDir, isOffline } from "./hf-cache.ts";
import { type RemoteDeps, readRemoteModel } from "./hub-header.ts";
import { hubAccess } from "./hub-listing.ts";
import { isNotDownloaded, resolveModelPath, withPullAgain } from "./resolve.ts";

/**
 * The plan's edges with one addition: an `hf:` model that is not in the cache is judged from
 * the hub's header (unless HF_HUB_OFFLINE), its plan saying so in a warning. Only `plan` uses
 * this; chat and doctor keep the offline read and its model_missing.
 */
export function planDepsWithHub(
  base: PlanDeps,
  env: Env = process.env,
  deps: RemoteDeps & MemoOptions = {},
): PlanDeps {
  return {
    ...base,
    readModel: async (path, key) => {
      const home = deps.home ?? (env.HOME || homedir());
      // The cache's stat off the loop first, as the model memo's (model-memo.ts): resolved here,
      // an `hf:` path reaches the memo as a plain one, and the resolve reads its ref synchronously.
      if (path.startsWith(HF_PREFIX)) await statAnswered(answersFor(deps), hubCacheDir(env, home), key, path);
      try {
        // Resolved here with this env (the base read leaves a plain path as it is).
        return await base.readModel(await resolveModelPath(path, env, home, key), key);
      } catch (err) {
        const ref = isNotDownloaded(err) ? parseHfModelPath(path) : undefined;
        // A cached file cut short is no missing one (the hub's header would hide it): said, with its
        // pull. Asked before the token is read: offline no request is made, so a bad token is no error.
        if (!ref || isOffline(env)) throw withPullAgain(path, err);
        const access = hubAccess(env, home, deps.fetch);
        try {
          const remote = await readRemoteModel(ref, access, deps.signal);
          const note = `not downloaded; judged from the hub's header (${ref.repo} ${remote.file} at ${ref.revision}): fetch it with: ${pullCommand(ref)}`;
          return { ...remote.model, warnings: [note, ...remote.model.warnings] };
        } catch (hubErr) {
          // Given up (the core's stop): its reason, not a missing model.
          if (!isCoreError(hubErr) || deps.signal?.aborted) throw hubErr;
          const local = err as CoreError;
          throw new CoreError(
            "model_missing",
            `${local.message}; the hub's header could not be read either: ${hubErr.message}`,
            {
              ...local.data,
              hub_problem: hubErr.data?.problem ?? null,
            },
          );
        }
      }
    },
  };
}
