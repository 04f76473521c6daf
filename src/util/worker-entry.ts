/**
 * A worker thread's entry point: in the compiled executable, its path among the embedded entry
 * points (relative to their common folder, src/: scripts/compile.ts); run from source, the file
 * itself. `fromSrc` is the former ("./store/chunk-worker.ts"), `beside` the latter (a URL made
 * from the caller's import.meta.url).
 */
export function workerEntry(fromSrc: string, beside: URL): string {
  const embedded = Bun.main.startsWith("/$bunfs/") || /^[A-Za-z]:[\\/]~BUN[\\/]/.test(Bun.main);
  return embedded ? fromSrc : beside.href;
}
