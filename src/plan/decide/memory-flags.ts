import type { Config } from "../../config/schema.ts";
import type { Decided } from "./decided.ts";

/** How the weights are held: `--no-mmap` and `--mlock`, straight from `llama.mmap`/`llama.mlock`. */
export function decideMemoryFlags(llama: Pick<Config["llama"], "mmap" | "mlock">): Decided<boolean> {
  const { mmap, mlock } = llama;
  return {
    value: mmap,
    decision: {
      name: "mmap",
      value: mmap,
      source: "config",
      flags: [...(mmap ? [] : ["--no-mmap"]), ...(mlock ? ["--mlock"] : [])],
      reason: mmap
        ? "weights are memory-mapped: fast start, pages shared with the file cache" +
          (mlock ? "; locked in RAM (llama.mlock)" : "")
        : "llama.mmap is false: weights are read into private memory" + (mlock ? " and locked" : ""),
    },
  };
}
