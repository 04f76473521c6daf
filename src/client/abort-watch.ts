import type { AbortSignalLike } from "./host-types.ts";

/**
 * The calls waiting on each AbortSignal, behind one listener per signal. A listener per call made
 * Node warn of a leak (MaxListenersExceededWarning, "11 abort listeners added to [AbortSignal]")
 * for a host that hands one signal (a window's, say) to more than ten calls at once.
 */
export class AbortWatch {
  private readonly watched = new WeakMap<AbortSignalLike, { calls: Set<string>; onAbort: () => void }>();

  constructor(private readonly abort: (id: string) => void) {}

  /** Call `id` is aborted with `signal`; the function returned stops watching it. */
  watch(id: string, signal: AbortSignalLike): () => void {
    let watch = this.watched.get(signal);
    if (!watch) {
      const calls = new Set<string>();
      const onAbort = () => {
        this.watched.delete(signal);
        for (const call of [...calls]) this.abort(call);
      };
      // Listening first: a signal that refuses the listener (it throws) is not kept as watched.
      signal.addEventListener("abort", onAbort, { once: true });
      watch = { calls, onAbort };
      this.watched.set(signal, watch);
    }
    const { calls, onAbort } = watch;
    calls.add(id);
    return () => {
      if (!calls.delete(id) || calls.size > 0) return;
      // The last call on it ended: the signal, which may outlive the client, holds nothing of ours.
      // Its throw is dropped: this runs as a call settles, in the core's stdout listener, where it
      // left the call unsettled and escaped into the host's process as an uncaught exception.
      try {
        signal.removeEventListener("abort", onAbort);
      } catch {}
      if (this.watched.get(signal)?.onAbort === onAbort) this.watched.delete(signal);
    };
  }
}
