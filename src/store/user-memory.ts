import { MemoryIndex } from "./memory-index.ts";

/**
 * Each user's memory index, built on first need in this process (a chat, or a warm-up naming
 * the user) and then kept in memory and updated after each turn.
 */
export class UserMemories {
  private readonly indexes = new Map<string, MemoryIndex>();

  constructor(
    private readonly dataDir: string,
    private readonly folders: string[],
  ) {}

  get(userId: string): MemoryIndex {
    let index = this.indexes.get(userId);
    if (!index) {
      index = MemoryIndex.forUser(this.dataDir, userId, this.folders).load();
      this.indexes.set(userId, index);
    }
    return index;
  }

  /** The users whose index is built. */
  keys(): IterableIterator<string> {
    return this.indexes.keys();
  }
}
