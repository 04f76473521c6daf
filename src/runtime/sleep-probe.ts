import type { LlamaEndpoint } from "./endpoint.ts";

// The two requests idle sleep needs (recordings 85, 86; llama-server's routes checked in its
// source: /health, /props and /v1/models answer without waking it, every other route waits
// for the model). Both carry the launch's key: /props is not public.

/** How long a look at /props may take; it answers at once unless the server is busy waking. */
const PROPS_TIMEOUT_MS = 2000;

/** GET /props `is_sleeping`: whether llama-server has unloaded its model; null when unknown. */
export async function propsSaysAsleep(endpoint: LlamaEndpoint): Promise<boolean | null> {
  try {
    const res = await fetch(`${endpoint.baseUrl}/props`, {
      headers: { Authorization: `Bearer ${endpoint.apiKey}` },
      signal: AbortSignal.timeout(PROPS_TIMEOUT_MS),
    });
    if (!res.ok) {
      await res.arrayBuffer();
      return null;
    }
    const props = (await res.json()) as { is_sleeping?: unknown };
    return typeof props.is_sleeping === "boolean" ? props.is_sleeping : null;
  } catch {
    return null;
  }
}

/**
 * Wakes a sleeping llama-server and waits until its model is back: `POST /tokenize` of nothing
 * is the cheapest request that needs the model (it posts no task and uses no slot), and
 * llama-server holds it until the reload is done. Rejects when `signal` aborts (the server is
 * gone) or after `timeoutMs` (llama.startup_timeout_s: a reload is the same load as a start).
 */
export async function rouseServer(
  endpoint: LlamaEndpoint,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<void> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(`${endpoint.baseUrl}/tokenize`, {
      method: "POST",
      headers: { Authorization: `Bearer ${endpoint.apiKey}`, "Content-Type": "application/json" },
      body: '{"content":""}',
      signal: AbortSignal.any([signal, timeout]),
    });
    // Whatever it answers, it answered after the wait for the model: it is awake.
    await res.arrayBuffer();
  } catch (err) {
    if (timeout.aborted && !signal.aborted)
      throw new Error(`it did not reload its model within ${timeoutMs / 1000} s (llama.startup_timeout_s)`);
    throw err;
  }
}
