/**
 * Settles as `work` does, unless `ms` pass first: then resolves `late`. The timer is cleared
 * either way, so it never holds the process open. The work itself keeps running: use it where
 * giving up on the wait is enough (an exit to notice, a drain, a last save).
 */
export async function within<T, L>(work: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<L>((resolve) => {
    timer = setTimeout(() => resolve(late), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
