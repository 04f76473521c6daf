import { logger } from "../../util/logger.ts";
import type { Connection, StartOutcome } from "./connect.ts";

/**
 * One configured MCP server's one state. A state object is replaced on every transition; the
 * start job and close() keep the object they saw and compare by identity, so whichever lost a
 * race (a start that ends after close()) sees that it no longer owns the current state.
 */
export type ServerState =
  /** Never started, or its connection closed (a crash, an exit): the next use starts it. */
  | { kind: "idle" }
  | {
      kind: "starting";
      /** Aborted by close(): the start kills what it spawned at once instead of waiting for it. */
      abort: AbortController;
      /** Never rejects; every caller that asked during the start waits for this one. */
      outcome: Promise<StartOutcome>;
    }
  | { kind: "ready"; conn: Connection }
  /**
   * The last start failed (a hang costs startup_timeout_s): uses within RETRY_AFTER_MS of `at`
   * get the same error at once. `stopped` settles once the killed process is gone.
   */
  | { kind: "failed"; at: number; error: unknown; stopped: Promise<void> }
  /** The pool closed: terminal. */
  | { kind: "closed" };

export type ServerStateKind = ServerState["kind"];

/**
 * idle → starting (a use); starting → ready | failed; ready → idle (the connection closed);
 * failed → starting (a use after RETRY_AFTER_MS); and every state but closed → closed (close()).
 */
const TRANSITIONS: Readonly<Record<ServerStateKind, readonly ServerStateKind[]>> = {
  idle: ["starting", "closed"],
  starting: ["ready", "failed", "closed"],
  ready: ["idle", "closed"],
  failed: ["starting", "closed"],
  closed: [],
};

export function canTransition(from: ServerStateKind, to: ServerStateKind): boolean {
  return TRANSITIONS[from].includes(to);
}

/** A server's current state, changed only through `swap`: a compare-and-set checked against the table. */
export class ServerCell {
  private current: ServerState = { kind: "idle" };

  constructor(readonly name: string) {}

  get(): ServerState {
    return this.current;
  }

  /**
   * Moves from `expected` to `next`. Returns false when `expected` is no longer current (the
   * caller lost a race and must clean up after itself). Throws on a transition the table does
   * not allow: that is a bug, never a race.
   */
  swap(expected: ServerState, next: ServerState): boolean {
    if (this.current !== expected) {
      logger.debug(`MCP '${this.name}': ${expected.kind} → ${next.kind} refused, it is ${this.current.kind}`);
      return false;
    }
    if (!canTransition(expected.kind, next.kind)) {
      throw new Error(`MCP '${this.name}': invalid state transition ${expected.kind} → ${next.kind}`);
    }
    this.current = next;
    logger.debug(`MCP '${this.name}': ${expected.kind} → ${next.kind}`);
    return true;
  }
}
