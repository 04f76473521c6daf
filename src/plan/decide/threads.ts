import type { Config } from "../../config/schema.ts";
import type { HardwareSnapshot } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import type { Decided } from "./decided.ts";

/** Threads (`-t`): `llama.threads`, else one per physical core (logical when unknown). */
export function decideThreads(
  requested: Config["llama"]["threads"],
  cpu: Pick<HardwareSnapshot["cpu"], "logical" | "physical">,
): Decided<number> {
  if (typeof requested === "number") {
    return {
      value: requested,
      decision: {
        name: "threads",
        value: requested,
        source: "config",
        flags: flags.threads(requested),
        reason: "llama.threads",
      },
    };
  }
  const threads = Math.max(1, cpu.physical ?? cpu.logical);
  return {
    value: threads,
    decision: {
      name: "threads",
      value: threads,
      source: "auto",
      flags: flags.threads(threads),
      reason: cpu.physical
        ? `one per physical core (${cpu.physical}); hyper-threads slow matrix work down`
        : `one per logical core (${cpu.logical}); physical cores unknown`,
    },
  };
}
