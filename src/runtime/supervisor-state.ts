import type { CoreError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { allowed, StateCell, type Transitions } from "../util/state-cell.ts";
import type { StateLines } from "./child-state.ts";
import type { Launch } from "./launch.ts";
import { ProgressBeat } from "./progress-beat.ts";
import type { ChildProcess } from "./spawn.ts";
import type { StartProgress } from "./start-progress.ts";

/** A llama-server that passed its readiness checks: what leases point at. */
export interface Running {
  child: ChildProcess;
  /**
   * The server as leases see it (launch.ts): endpoint, `died`, props, slot use, and its idle
   * sleep, a detail of `ready` rather than a state of its own (asleep, the same process keeps
   * serving, and the next lease wakes it).
   */
  launch: Launch;
  port: number;
  /** Clock time (the supervisor's `now`) of the spawn and of readiness. */
  startedAt: number;
  readyAt: number;
  /** Its state lines: `speaks` when it runs as our child (stopped by the exit line first). */
  childMode: StateLines;
  /**
   * Once both of its pipes have ended (they close as it exits): whether its memory is given back
   * by then (proc-memory.ts), a few ms before its exit is reported (launch-steps.ts stopChild).
   */
  released: () => Promise<boolean>;
}

/**
 * The supervisor's one state. `restartFor` is the failure (crash, wedge) that makes the next
 * start a restart, counted against the budget; it survives a failed restart so the next
 * acquire counts again. A state object is replaced on every transition; the jobs that own a
 * state (a start, a stop) keep a reference to it and compare by identity, so a job that lost
 * a race (stop() during a start) sees that it no longer owns the current state.
 */
export type SupervisorState =
  | { kind: "stopped"; restartFor?: CoreError; lastError?: CoreError }
  | {
      kind: "starting";
      since: number;
      restartFor?: CoreError;
      /** The host asked for it (warmup): a failure of a moment ago is tried again (launcher.ts). */
      explicit: boolean;
      /** Resolved when the host asks (`askedFor`): a restart's back-off ends at once. */
      backoffCut: PromiseWithResolvers<void>;
      /** Aborted by stop(): every start step gives up and kills what it spawned. */
      abort: AbortController;
      /** Every acquire caller waiting for this start hears its progress, at least twice a second. */
      progress: ProgressBeat;
      done: Promise<Running>;
      /** Filled in by the start as it spawns (a detail for status, not a change of state). */
      pid?: number;
      /** Loading's fraction of the child spawned (load-fraction.ts); undefined when unknown. */
      loadFraction?: () => number | undefined;
      /** Settles once llama-server is spawned, or the start ended without it. */
      spawned: PromiseWithResolvers<void>;
      /** How it failed: the error and the state it left behind (for a prestart's caller). */
      failure?: { error: unknown; into: SupervisorState };
    }
  | { kind: "ready"; running: Running }
  | { kind: "stopping"; running: Running; restartFor?: CoreError; done: Promise<void> }
  | { kind: "closing"; done: Promise<void> }
  | { kind: "closed" };

export type StateKind = SupervisorState["kind"];
export type StateOf<K extends StateKind> = Extract<SupervisorState, { kind: K }>;

/**
 * The transitions that exist. stopped → starting (an acquire), starting → ready | stopped (a
 * failed start), ready → stopping (a reported failure) | stopped (a crash), stopping → stopped,
 * stopped → stopped (a crash's error named once its lost RPC worker is found, rpc-watch.ts), and
 * from every live state → closing (stop()), closing → closed, which is terminal.
 */
const TRANSITIONS: Transitions<StateKind> = {
  stopped: ["starting", "stopped", "closing"],
  starting: ["ready", "stopped", "closing"],
  ready: ["stopping", "stopped", "closing"],
  stopping: ["stopped", "closing"],
  closing: ["closed"],
  closed: [],
};

export function canTransition(from: StateKind, to: StateKind): boolean {
  return allowed(TRANSITIONS, from, to);
}

/** The supervisor's state cell: stopped until an acquire starts llama-server. */
export function supervisorCell(initial: SupervisorState = { kind: "stopped" }): StateCell<SupervisorState> {
  return new StateCell("supervisor", TRANSITIONS, initial);
}

/** The child that leases point at: ready, or being stopped. */
export function serving(s: SupervisorState): Running | undefined {
  return s.kind === "ready" || s.kind === "stopping" ? s.running : undefined;
}

/**
 * The host's ask (a warmup) joined the start under way: a failure of a moment ago is tried
 * (launcher.ts holdBack) and a restart's back-off ends, as for a start the host began.
 */
export function askedFor(s: SupervisorState): void {
  if (s.kind !== "starting") return;
  s.explicit = true;
  s.backoffCut.resolve();
  // A start's beat says `restarting` only for its back-off, now over: the ask joining it (and the
  // callers before) hear the launch begin, not a back-off that no longer applies (protocol.md).
  if (s.progress.phase === "restarting") s.progress.report({ phase: "starting", attempt: 1 });
}

/** A failed server is being stopped before the restart: `restarting` while it goes. */
export async function waitOutStop(
  s: StateOf<"stopping">,
  signal: AbortSignal,
  onProgress?: (p: StartProgress) => void,
): Promise<void> {
  const beat = new ProgressBeat(Date.now());
  beat.add(onProgress);
  beat.report({ phase: "restarting" });
  try {
    await abortable(s.done, signal);
  } finally {
    beat.stop();
  }
}
