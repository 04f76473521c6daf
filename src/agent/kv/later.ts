import { logger } from "../../util/logger.ts";

// The saves before an unload (docs/agent.md#prompt-reuse): llama-server writes the slot files
// first, the core keeps them (sidecars, fsyncs, budget) once it has stopped (reuse.ts).

/** The core's part of the saves before an unload, put off until the server has stopped. */
export interface Later {
  keeps: (() => Promise<void>)[];
  /** Set once saveBeforeUnload stopped waiting: a save that ends later keeps at once. */
  closed: boolean;
}

export async function keepAll(keeps: (() => Promise<void>)[]): Promise<void> {
  for (const keep of keeps) {
    await keep().catch((err) => logger.warn(`keeping KV state failed: ${(err as Error).message}`));
  }
}
