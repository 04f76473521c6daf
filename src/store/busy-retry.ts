/**
 * `work` tried again while SQLite answers SQLITE_BUSY (another connection holds the write lock:
 * another core on the data folder, or this core's chunk thread), off the event loop: the
 * connection's own busy wait is 20 ms (db/open.ts), so a write that went straight to it failed
 * whenever another held the lock longer. Waits 5 ms, doubling to 100 ms, until `waitMs` have
 * passed; then the error is thrown as it came.
 */
export async function whileBusy<T>(work: () => T, waitMs: number): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    try {
      return work();
    } catch (err) {
      const busy = /^SQLITE_BUSY/.test((err as { code?: string }).code ?? "");
      if (!busy || Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
