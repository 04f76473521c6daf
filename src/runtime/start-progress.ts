/**
 * What a caller hears while it waits for llama-server (the `warmup_progress` events of warmup
 * and chat; the protocol's schema is src/protocol/warmup-progress.ts). `elapsed_ms` counts from the
 * start of the start or wake being waited for; `fraction` is how far the load is: llama-server's
 * own loading lines where it runs as our child, else the share of the model file read so far,
 * where the OS shows it (load-fraction.ts). The supervisor repeats the current phase at least
 * every 500 ms while the wait lasts.
 */
export type StartProgress =
  | { phase: "restarting"; elapsed_ms: number; backoff_ms?: number }
  | { phase: "starting"; attempt: number; elapsed_ms: number }
  | { phase: "loading"; elapsed_ms: number; fraction?: number }
  | { phase: "waking"; elapsed_ms: number; fraction?: number }
  | { phase: "ready"; elapsed_ms: number };
