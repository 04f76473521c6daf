import type { Config } from "../../config/schema.ts";
import { flags, PLAN_DIALECT } from "../argv.ts";
import type { Decided } from "./decided.ts";

/**
 * How the weights are held, straight from `llama.mmap`/`llama.mlock`: shown as `--no-mmap` and
 * `--mlock`; launched in the flags the binary takes (argv.ts).
 */
export function decideMemoryFlags(
  llama: Pick<Config["llama"], "mmap" | "mlock">,
): Decided<{ mmap: boolean; mlock: boolean }> {
  const { mmap, mlock } = llama;
  return {
    value: { mmap, mlock },
    decision: {
      name: "mmap",
      value: mmap,
      source: "config",
      flags: flags.memory(llama, PLAN_DIALECT),
      reason: mmap
        ? "weights are memory-mapped: fast start, pages shared with the file cache" +
          (mlock ? "; locked in RAM (llama.mlock)" : "")
        : "llama.mmap is false: weights are read into private memory" + (mlock ? " and locked" : ""),
    },
  };
}
