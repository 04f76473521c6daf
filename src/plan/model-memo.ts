import { statSync } from "node:fs";
import { readGgufHeader, shardPaths } from "./gguf-read.ts";
import { type ModelInfo, modelInfo } from "./model.ts";

/**
 * The model as the planner sees it, read once per file version: every start, restart and wake
 * plans again, and `initialize` reads it ahead (docs/performance.md "Chat overhead"), so a cold
 * chat does not parse the header on its critical path. A file counts as the same while its
 * size, modification time and inode are; anything else (or a stat that fails) reads it again.
 * `resolve` turns the configured path into the file (an `hf:` path is resolved from the cache
 * by the models floor above, which hands its resolver in); it runs at every read, as a pull
 * may have changed what the path names.
 */
export class ModelMemo {
  private last: { path: string; identity: string; info: ModelInfo } | undefined;
  /** Headers parsed so far (what the memo saved is the rest of the reads). */
  parses = 0;

  constructor(private readonly resolve: (configured: string) => string = (path) => path) {}

  async read(configured: string): Promise<ModelInfo> {
    const path = this.resolve(configured);
    const identity = identityOf(path);
    const last = this.last;
    if (identity !== null && last && last.path === path && last.identity === identity) return last.info;
    const info = modelInfo(await readGgufHeader(path));
    this.parses++;
    this.last = identity === null ? undefined : { path, identity, info: Object.freeze(info) };
    return info;
  }
}

function identityOf(path: string): string | null {
  try {
    return shardPaths(path)
      .map((f) => {
        const st = statSync(f);
        return `${st.size}:${st.mtimeMs}:${st.ino}`;
      })
      .join("|");
  } catch {
    return null;
  }
}
