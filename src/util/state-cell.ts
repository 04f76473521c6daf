import { logger } from "./logger.ts";

/** For each state kind, the kinds it may move to; an empty list is a terminal state. */
export type Transitions<K extends string> = Readonly<Record<K, readonly K[]>>;

/** Whether `table` lets `from` move to `to`. */
export function allowed<K extends string>(table: Transitions<K>, from: K, to: K): boolean {
  return table[from].includes(to);
}

/**
 * One state union's current value, changed only through `swap`: a compare-and-set on the state
 * object the caller believes is current, checked against the transition table. A state object
 * is replaced on every transition, so a job holding one it no longer owns (it lost a race)
 * finds out by identity. `label` names the owner in the debug log and in the error.
 */
export class StateCell<S extends { kind: K }, K extends string = S["kind"]> {
  private current: S;

  constructor(
    private readonly label: string,
    private readonly table: Transitions<K>,
    initial: S,
  ) {
    this.current = initial;
  }

  get(): S {
    return this.current;
  }

  /**
   * Moves from `expected` to `next`. Returns false when `expected` is no longer current (the
   * caller lost a race and must clean up after itself). Throws on a transition the table does
   * not allow: that is a bug, never a race.
   */
  swap(expected: S, next: S): boolean {
    if (this.current !== expected) {
      logger.debug(`${this.label}: ${expected.kind} → ${next.kind} refused, it is ${this.current.kind}`);
      return false;
    }
    if (!allowed(this.table, expected.kind, next.kind)) {
      throw new Error(`${this.label}: invalid state transition ${expected.kind} → ${next.kind}`);
    }
    this.current = next;
    logger.debug(`${this.label}: ${expected.kind} → ${next.kind}`);
    return true;
  }
}
