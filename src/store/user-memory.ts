import type { Core } from "../server/core.ts";
import { MemoryIndex } from "./memory-index.ts";

/**
 * A user's memory index, built on first need in this process (a chat, or a warm-up naming the
 * user) and then kept in memory and updated after each turn.
 */
export function userMemory(core: Core, userId: string): MemoryIndex {
  const { config } = core.config();
  const indexes = core.service("memory-indexes", () => new Map<string, MemoryIndex>());
  let index = indexes.get(userId);
  if (!index) {
    index = MemoryIndex.forUser(config.app.data_dir, userId, config.memory.folders).load();
    indexes.set(userId, index);
  }
  return index;
}
