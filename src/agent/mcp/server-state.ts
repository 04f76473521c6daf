import { allowed, StateCell, type Transitions } from "../../util/state-cell.ts";
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
   * A call to it outlasted timeout_s while other calls were in flight: it is killed once they
   * have settled (each bounded by its own timeout_s), not at once, which failed them all. No new
   * call is sent to it; those wait for `gone` (resolved as it leaves this state), within their own
   * timeout_s, and start a fresh server. Its tools are still listed from what it listed (no message to it).
   */
  | { kind: "draining"; conn: Connection; why: string; gone: PromiseWithResolvers<void> }
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
 * ready → draining (a call timed out beside others) → idle (the last settled and it was killed,
 * or it closed); failed → starting (a use after RETRY_AFTER_MS); and every state but closed →
 * closed (close()).
 */
const TRANSITIONS: Transitions<ServerStateKind> = {
  idle: ["starting", "closed"],
  starting: ["ready", "failed", "closed"],
  ready: ["idle", "draining", "closed"],
  draining: ["idle", "closed"],
  failed: ["starting", "closed"],
  closed: [],
};

export function canTransition(from: ServerStateKind, to: ServerStateKind): boolean {
  return allowed(TRANSITIONS, from, to);
}

/** A configured server's state cell: idle until its first use. */
export function serverCell(name: string): StateCell<ServerState> {
  return new StateCell(`MCP '${name}'`, TRANSITIONS, { kind: "idle" });
}
