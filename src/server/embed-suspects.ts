import { createHash } from "node:crypto";
import { keepLatest } from "../util/keep-latest.ts";

/**
 * The inputs an embedding server crashed with (docs/protocol.md#embed, "An input that crashes the
 * server"). llama-server that dies on an input dies again each time it is sent it, and whoever sent
 * it (memory's job, a document's add, a host's loop) would send it again after every restart,
 * until the restart budget is spent and nothing is embedded at all. So each input in flight when
 * the server died is counted, by its text's hash; one in flight alone in its request, its request
 * alone on the server, during a second death in a row is known to crash the server, and refused
 * from then on without being sent.
 * An input embedded is forgotten. Kept in memory for the core's life, one per model, bounded.
 */

/** Deaths in a row with an input in flight (the last with it alone) that convict it. */
export const CRASHES_TO_CONVICT = 2;
/** Inputs counted, and inputs convicted, at most (the oldest forgotten first). */
const MOST_COUNTED = 4_096;
const MOST_CONVICTED = 1_024;

export class CrashSuspects {
  private readonly counted = new Map<string, number>();
  private readonly convicted = new Set<string>();

  /** The place in `inputs` of the first known to crash the server, if any. */
  convictedIn(inputs: readonly string[]): number | undefined {
    if (this.convicted.size === 0) return undefined;
    const i = inputs.findIndex((t) => this.convicted.has(key(t)));
    return i < 0 ? undefined : i;
  }

  /**
   * The server died with `inFlight` in its request: each is counted. Returns whether the one
   * input of a request of one is now convicted (it had been in flight at the death before too);
   * never when `alone` is false: another request was in flight on the server meanwhile, and
   * the death may have been its input's (two senders at once: memory's job and a host's loop).
   */
  died(inFlight: readonly string[], alone: boolean): boolean {
    for (const t of inFlight) {
      const k = key(t);
      keepLatest(this.counted, k, (this.counted.get(k) ?? 0) + 1, MOST_COUNTED);
    }
    const [only] = inFlight;
    if (!alone || inFlight.length !== 1 || only === undefined) return false;
    const k = key(only);
    if ((this.counted.get(k) ?? 0) < CRASHES_TO_CONVICT) return false;
    this.counted.delete(k);
    this.convicted.add(k);
    if (this.convicted.size > MOST_CONVICTED)
      this.convicted.delete(this.convicted.values().next().value as string);
    return true;
  }

  /** `inputs` were embedded: whatever deaths they were in flight at were not theirs. */
  served(inputs: readonly string[]): void {
    if (this.counted.size === 0) return;
    for (const t of inputs) this.counted.delete(key(t));
  }
}

function key(text: string): string {
  return createHash("sha256").update(text).digest("base64");
}
