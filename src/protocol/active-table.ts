import { cutText } from "../util/text-cut.ts";
import { BY_ID_ONLY } from "./by-id-only.ts";
import { CoreError } from "./errors.ts";
import { exactKey } from "./exact-id.ts";
import type { RequestId } from "./messages.ts";

/**
 * Active requests by id; "1" and 1 are different ids, so strings and numbers keep apart. A
 * number id beyond a double's integers is kept by its exact digits (docs/protocol.md, ids).
 */
export class ActiveTable<T> {
  private readonly byString = new Map<string, T>();
  private readonly byNumber = new Map<number, T>();
  private readonly byDigits = new Map<string, T>();

  /** How many entries it holds, every kind of id together. */
  get size(): number {
    return this.byString.size + this.byNumber.size + this.byDigits.size;
  }

  get(id: RequestId): T | undefined {
    if (typeof id === "string") return this.byString.get(id);
    const key = exactKey(id);
    return "value" in key ? this.byNumber.get(key.value) : this.byDigits.get(key.digits);
  }
  set(id: RequestId, r: T): void {
    if (typeof id === "string") return void this.byString.set(id, r);
    const key = exactKey(id);
    if ("value" in key) this.byNumber.set(key.value, r);
    else this.byDigits.set(key.digits, r);
  }
  delete(id: RequestId): void {
    if (typeof id === "string") return void this.byString.delete(id);
    const key = exactKey(id);
    if ("value" in key) this.byNumber.delete(key.value);
    else this.byDigits.delete(key.digits);
  }
  /**
   * Up to `limit` entries `keep` picks, oldest first by `since`: each map keeps arrival order, so
   * this reads at most `limit` picked entries of each (status in a burst of thousands of requests
   * listed them all each time: quadratic, a hostile review).
   */
  oldest(limit: number, keep: (r: T) => boolean, since: (r: T) => number): T[] {
    const picked: T[] = [];
    for (const map of [this.byString, this.byNumber, this.byDigits]) {
      let n = 0;
      for (const r of map.values()) {
        if (n >= limit) break;
        if (keep(r)) {
          picked.push(r);
          n++;
        }
      }
    }
    return picked.sort((a, b) => since(a) - since(b)).slice(0, limit);
  }

  all(): T[] {
    return [...this.byString.values(), ...this.byNumber.values(), ...this.byDigits.values()];
  }
}

/** Characters of a request id an ambiguous cancel's error quotes. */
const SHOWN_ID_CHARS = 80;

/** A host's id as an error quotes it: as JSON, cut (ids are of any length). */
export function shownId(id: RequestId): string {
  return cutText(JSON.stringify(id), SHOWN_ID_CHARS);
}

/**
 * A `cancel` without `request_id` while several requests could be meant: they are named by id and
 * method (they need not be chats: a documents.add, a pull…), each id cut (a host's ids are of any
 * length, and four whole could outgrow an answer's line).
 */
export function ambiguousCancel(
  candidates: readonly { id: RequestId; method: { name: string } }[],
): CoreError {
  const named = candidates.slice(0, 4).map((a) => `${shownId(a.id)} (${a.method.name})`);
  const more = candidates.length > 4 ? ", …" : "";
  return new CoreError(
    "invalid_request",
    `request_id is required while ${candidates.length} cancellable requests are active: ${named.join(", ")}${more}`,
    { field: "request_id" },
  );
}

/**
 * Requests a `cancel` with no `request_id` may mean: those not already cancelled and winding down,
 * and none of BY_ID_ONLY. SPEC's implicit cancel is of the one chat active.
 */
export function implicitCandidates<
  T extends { controller: unknown; settled: boolean; signal: AbortSignal; method: { name: string } },
>(all: readonly T[]): T[] {
  return all.filter((a) => a.controller && !a.settled && !a.signal.aborted && !BY_ID_ONLY.has(a.method.name));
}
