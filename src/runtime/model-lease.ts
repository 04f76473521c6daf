import type { LlamaLease } from "./endpoint.ts";

/** A lease on one model's llama-server, as the scheduler hands it out (scheduler.ts). */
export interface ModelLease extends LlamaLease {
  /** The model's name, as the scheduler knows it (a configured name, or a path). */
  readonly model: string;
}

/**
 * `lease` with its release told to the scheduler once (the model stops counting as busy). The
 * endpoint is read through, not copied: a reconnect moves the lease to a restarted server.
 */
export function modelLease(model: string, lease: LlamaLease, released: () => void): ModelLease {
  let done = false;
  const wrapped: ModelLease = {
    model,
    get baseUrl() {
      return lease.baseUrl;
    },
    get apiKey() {
      return lease.apiKey;
    },
    get died() {
      return lease.died;
    },
    get requestTimeoutMs() {
      return lease.requestTimeoutMs;
    },
    get launch() {
      return lease.launch;
    },
    release: () => {
      if (done) return;
      done = true;
      try {
        lease.release();
      } finally {
        released();
      }
    },
    reportFailure: (reason) => lease.reportFailure(reason),
  };
  const reconnect = lease.reconnect?.bind(lease);
  if (reconnect) wrapped.reconnect = reconnect;
  return wrapped;
}
