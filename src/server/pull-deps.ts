import { homedir } from "node:os";
import type { PullDeps } from "../models/pull.ts";
import { processStartedAt, procIdentity } from "../runtime/proc-info.ts";

/**
 * A pull's edges on this machine, read when a pull begins: the process's environment (HF_*),
 * the home folder (the token file, the default cache). The `pull` method and command both use
 * it; methods do no IO of their own (docs/architecture.md, Method definitions).
 */
export function machinePullDeps(): PullDeps {
  return {
    env: process.env,
    home: homedir(),
    // A lock whose pid now names another process (a reboot) is stale: told by its start time.
    processStart: (pid) => procIdentity(pid)?.start_time ?? null,
    processStartedAt,
  };
}
