import type { SpareConnection } from "../llama/spare-connection.ts";
import type { LaunchPlan } from "../plan/launch-plan.ts";
import { CoreError, cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { logger } from "../util/logger.ts";
import { within } from "../util/within.ts";
import type { AcquireOptions, LlamaLease, LlamaProvider, StartTicket } from "./endpoint.ts";
import { goneUnseen } from "./gone-unseen.ts";
import { type Exit, politeStopWait, stopChild, TAIL_IN_ERRORS } from "./launch-steps.ts";
import { Launcher } from "./launcher.ts";
import { leaseOn } from "./lease.ts";
import { withoutQuotes } from "./log-redact.ts";
import { LogTail } from "./log-sink.ts";
import { recordAfterStop } from "./pid-file.ts";
import { Prestart } from "./prestart.ts";
import { ProgressBeat } from "./progress-beat.ts";
import { RestartPolicy } from "./restart-policy.ts";
import { RpcWatch } from "./rpc-watch.ts";
import { type SupervisorSnapshot, snapshotOf } from "./snapshot.ts";
import type { StartProgress } from "./start-progress.ts";
import type { SupervisorOptions } from "./supervisor-options.ts";
import {
  askedFor,
  type Running,
  type StateOf,
  type SupervisorState,
  serving,
  supervisorCell,
  waitOutStop,
} from "./supervisor-state.ts";

type Progress = (p: StartProgress) => void;
const shuttingDown = () => cancelledError("llama-server is stopping: the core is shutting down");
/** How long a server that refused a connection may take to be seen exiting before it is failed. */
const EXIT_NOTICE_MS = 2000;

/**
 * Owns llama-server's life as one state (supervisor-state.ts): stopped → starting → ready →
 * stopping → stopped, closing → closed at shutdown. Concurrent acquires share one start; leases
 * wait in line for a slot (launch.ts); a crash ends every lease and the next acquire restarts,
 * within a restart budget and with back-off.
 */
export class Supervisor implements LlamaProvider {
  private readonly state = supervisorCell();
  readonly tail = new LogTail();
  /** The RPC workers of the current launch: their log signatures, the one that was lost. */
  private readonly rpc = new RpcWatch({ onLost: (err) => this.failReady(err) });
  private readonly restarts: RestartPolicy;
  private readonly launcher: Launcher;
  /** A crashed wrapper's group, SIGKILLed, until it has ended (its memory): a restart waits for it. */
  private groupEnd: Promise<void> = Promise.resolve();

  constructor(private readonly options: SupervisorOptions) {
    this.restarts = new RestartPolicy(options.settings, options.now ?? Date.now, this.tail);
    this.launcher = new Launcher(options, this.tail, this.rpc);
  }

  /** The process's phase: shutting down reads as stopping, shut down as stopped. */
  currentState(): "stopped" | "starting" | "ready" | "stopping" {
    const kind = this.state.get().kind;
    return kind === "closing" ? "stopping" : kind === "closed" ? "stopped" : kind;
  }

  /** The serving child's pid, for diagnostics and tests. */
  pid(): number | undefined {
    return serving(this.state.get())?.child.pid;
  }
  readsImages = (): boolean | undefined => serving(this.state.get())?.launch.vision;

  slots(): number {
    return this.launcher.plan?.slots ?? this.options.fallbackSlots?.() ?? 1;
  }

  /** Never throws and never touches llama-server: `status` answers from it at once. */
  snapshot(): SupervisorSnapshot {
    const s = this.state.get();
    // The serving launch's one table of slot use (launch.ts); none is serving: none in use.
    const use = serving(s)?.launch.slots;
    const slots = { busy: use?.leases ?? 0, waiting: use?.waiting ?? 0, total: this.slots() };
    return snapshotOf(s, this.launcher, slots, this.restarts.report(s));
  }

  async acquire(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<LlamaLease> {
    for (;;) {
      signal.throwIfAborted();
      const running = await this.whenRunning(signal, onProgress, options);
      if (await this.admitted(running, signal, onProgress))
        return leaseOn(running, {
          requestTimeoutMs: this.options.settings().requestTimeoutMs,
          reportFailure: (on, reason) => this.reportFailure(on, reason),
          successor: (old, abort, progress) => this.successor(old, abort, progress),
        });
      // It died (or failed) while we waited for a slot or looked: start again.
    }
  }

  /** Started when needed and ready, no slot taken; the signal aborts as that server ends (model-runtime.ts `ready`). */
  async ready(...[signal, onProgress, options]: Parameters<Supervisor["acquire"]>): Promise<AbortSignal> {
    return (await this.whenRunning(signal, onProgress, options)).launch.died;
  }

  /**
   * A slot on `running`, in line behind the callers before (its launch's table: one count per
   * server), then `usable`. False, the slot given back: it died or failed meanwhile.
   */
  private async admitted(running: Running, signal: AbortSignal, onProgress?: Progress): Promise<boolean> {
    if (!(await running.launch.admit(signal))) return false;
    let usable = false;
    try {
      usable = await this.usable(running, signal, onProgress);
      return usable;
    } finally {
      if (!usable) running.launch.leave();
    }
  }

  /**
   * Whether `running` may take the lease it admitted: still the one serving, listening, and awake
   * (woken first, with progress). False: it died or failed meanwhile, and the caller starts again.
   */
  private async usable(running: Running, signal: AbortSignal, onProgress?: Progress): Promise<boolean> {
    const s = this.state.get();
    if (running.launch.died.aborted || s.kind !== "ready" || s.running !== running) return false;
    // A SIGKILL of a moment ago is learned on a later tick: the one cheap look that settles it
    // comes before the lease, so the chat restarts it now, with progress, not on a dead port.
    if (await goneUnseen(running.child.pid, running.port, signal)) {
      await this.refused(running);
      return false;
    }
    running.launch.noteRunning();
    try {
      // Asleep (llama.idle_sleep_s): wait for the model to reload, with progress.
      await running.launch.wake(signal, onProgress);
      return true;
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      // It died while waking (the crash is handled by onExit), or never woke: start again.
      if (!running.launch.died.aborted) this.reportFailure(running, (err as Error).message);
      return false;
    }
  }

  /**
   * A server we started refused a connection: it is gone, its exit not yet seen. Waits for the
   * exit, which onExit takes as the crash it is (the next start a restart, within the budget);
   * one still there after EXIT_NOTICE_MS is failed and stopped instead.
   */
  private async refused(running: Running): Promise<void> {
    const seen = running.child.exited.then(() => true);
    if (!(await within(seen, EXIT_NOTICE_MS, false)))
      this.reportFailure(running, "it refused connections on its own port");
  }

  /**
   * A lease's request was refused, or its server died before it sent one (lease.reconnect): the
   * crash it is, then a server that serves for the lease to move to, restarted within the budget.
   */
  private async successor(old: Running, signal: AbortSignal, onProgress?: (p: StartProgress) => void) {
    if (!old.launch.died.aborted) await this.refused(old);
    for (;;) {
      signal.throwIfAborted();
      const running = await this.whenRunning(signal, onProgress);
      if (await this.admitted(running, signal, onProgress)) return running;
    }
  }

  /** A chat's first connection ahead (launch.ts), taken only while /proc says the server runs. */
  connectAhead(): SpareConnection | undefined {
    const s = this.state.get();
    return s.kind === "ready" ? s.running.launch.connectAhead() : undefined;
  }

  prestart(): StartTicket | undefined {
    const s = this.state.get();
    if (s.kind !== "stopped" || s.restartFor !== undefined) return undefined;
    this.beginStart(s, false);
    const now = this.state.get();
    return now.kind === "starting" ? new Prestart(now) : undefined;
  }

  /** Stops the server and closes; `untilReleased`: model-runtime.ts. */
  async stop(options: { untilReleased?: boolean } = {}): Promise<void> {
    const from = this.state.get();
    if (from.kind === "closed") return;
    if (from.kind === "closing") return from.done;
    const done = Promise.withResolvers<void>();
    const closing: SupervisorState = { kind: "closing", done: done.promise };
    this.state.swap(from, closing);
    // Callers in line for a slot hear it as the serving launch ends (halt, launch.ts end).
    try {
      if (from.kind === "starting") {
        from.abort.abort(shuttingDown());
        await from.done.catch(() => {});
      } else if (from.kind === "ready") {
        await this.halt(from.running, "stop", options.untilReleased);
      } else if (from.kind === "stopping") {
        await from.done;
      }
      // A crash's SIGKILLed group still exiting: the next model's start must not meet its memory.
      await this.groupEnd;
    } finally {
      this.state.swap(closing, { kind: "closed" });
      this.launcher.close();
      done.resolve();
    }
  }

  /**
   * A start of the scheduler's `plan` held now (launcher.ts checkHold), asked before room is made
   * for it; a start the host asked for (`explicit`) or a restart after a crash is not held.
   */
  checkHold(plan: LaunchPlan, explicit: boolean): Promise<void> {
    const s = this.state.get();
    if (s.kind !== "stopped" || s.restartFor !== undefined) return Promise.resolve();
    return this.launcher.checkHold(plan, explicit);
  }

  /** The host asked for its start under way (supervisor-state.ts `askedFor`). */
  asked = (): void => askedFor(this.state.get());

  /** A ready server, after starting it or waiting for the start or stop under way. */
  private async whenRunning(
    signal: AbortSignal,
    onProgress: ((p: StartProgress) => void) | undefined,
    { explicit = false, prestarted }: AcquireOptions = {},
  ): Promise<Running> {
    for (;;) {
      const s = this.state.get();
      // The start this caller began on arrival failed, and nothing since: its error, once.
      if (prestarted instanceof Prestart && prestarted.failedInto(s)) throw prestarted.take();
      switch (s.kind) {
        case "ready":
          return s.running;
        case "closing":
        case "closed":
          throw shuttingDown();
        case "stopping":
          await waitOutStop(s, signal, onProgress);
          continue;
        case "starting":
          if (explicit) this.asked();
          return await this.joinStart(s, signal, onProgress);
        case "stopped":
          this.beginStart(s, explicit);
          continue;
      }
    }
  }

  private async joinStart(
    s: StateOf<"starting">,
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
  ): Promise<Running> {
    s.progress.add(onProgress);
    try {
      return await abortable(s.done, signal);
    } finally {
      s.progress.delete(onProgress);
    }
  }

  /** stopped → starting; throws (leaving the state alone) when a restart is over budget. */
  private beginStart(from: StateOf<"stopped">, explicit: boolean): void {
    const backoffMs = from.restartFor ? this.restarts.delay(from.restartFor, explicit) : 0;
    const done = Promise.withResolvers<Running>();
    // Every caller may have given up (aborted); the failure is still theirs, not unhandled.
    done.promise.catch(() => {});
    const since = Date.now();
    const starting: StateOf<"starting"> = {
      kind: "starting",
      since,
      restartFor: from.restartFor,
      explicit,
      backoffCut: Promise.withResolvers<void>(),
      abort: new AbortController(),
      spawned: Promise.withResolvers<void>(),
      // Loading's fraction: the child's state lines, else /proc (load-fraction.ts).
      progress: new ProgressBeat(since, () => starting.loadFraction?.()),
      done: done.promise,
    };
    // The caller hears this start through joinStart, like every other caller.
    if (backoffMs > 0) starting.progress.report({ phase: "restarting", backoff_ms: backoffMs });
    this.state.swap(from, starting);
    this.runStart(starting, backoffMs).then(done.resolve, done.reject);
  }

  /** The start job: back-off, then the launch; it owns `starting` until ready or failed. */
  private async runStart(starting: StateOf<"starting">, backoffMs: number): Promise<Running> {
    const { signal } = starting.abort;
    try {
      if (backoffMs > 0)
        await abortable(Promise.race([Bun.sleep(backoffMs), starting.backoffCut.promise]), signal);
      await abortable(this.groupEnd, signal);
      starting.progress.report({ phase: "starting", attempt: 1 });
      const running = await this.launcher.launch(starting);
      if (!this.state.swap(starting, { kind: "ready", running })) {
        // stop() took over while the last step finished: this server never serves.
        await this.halt(running, "stop");
        throw shuttingDown();
      }
      const launch = this.rpc.launchId();
      void running.child.exited.then((e) => this.onExit(running, e, launch));
      logger.info(
        `llama-server ready on ${running.launch.baseUrl} (pid ${running.child.pid}) after ${running.readyAt - running.startedAt} ms`,
      );
      return running;
    } catch (err) {
      this.rpc.ended();
      const lastError =
        err instanceof CoreError
          ? err
          : new CoreError("internal_error", String((err as Error)?.message ?? err));
      const into: SupervisorState = { kind: "stopped", restartFor: starting.restartFor, lastError };
      starting.failure = { error: err, into };
      this.state.swap(starting, into);
      throw err;
    } finally {
      starting.progress.stop();
      starting.spawned.resolve();
    }
  }

  /** A lease's server failed it (wedged, protocol garbage): restart it, counted against the budget. */
  private reportFailure(running: Running, reason: string): void {
    const s = this.state.get();
    if (s.kind !== "ready" || s.running !== running) return;
    // The reason may be llama-server's answer, which can quote the request (the conversation):
    // not in the log, nor in the error every lease on this server and `status` get (other
    // users' chats among them).
    const shown = withoutQuotes(reason);
    logger.warn(`llama-server failed a request (${shown}); restarting it`);
    const why = `llama-server stopped serving (${shown}); it will be restarted`;
    this.failRunning(s, new CoreError("internal_error", why, { log_tail: this.tail.last(TAIL_IN_ERRORS) }));
  }

  /** The ready server lost an RPC worker (rpc-watch.ts): leases get the named error; restart. */
  private failReady(err: CoreError): void {
    const s = this.state.get();
    if (s.kind !== "ready") return;
    const data = { ...err.data, log_tail: this.tail.last(TAIL_IN_ERRORS) };
    this.failRunning(s, new CoreError(err.code, err.message, data));
  }

  /** ready → stopping → stopped, the next start a restart for `err`, which leases see at once. */
  private failRunning(s: StateOf<"ready">, err: CoreError): void {
    const { running } = s;
    running.launch.end(err);
    const done = Promise.withResolvers<void>();
    const stopping: StateOf<"stopping"> = { kind: "stopping", running, restartFor: err, done: done.promise };
    this.state.swap(s, stopping);
    void this.halt(running, "failure").finally(() => {
      this.state.swap(stopping, { kind: "stopped", restartFor: err, lastError: err });
      done.resolve();
    });
  }

  /** The serving child exited: expected while stopping or closing, a crash while ready. */
  private onExit(running: Running, exit: Exit, launch: number): void {
    running.launch.end();
    // Kept aside while a wrapper's group lingers, as after a stop (docs/supervisor.md "Orphans").
    recordAfterStop(this.options.dataDir(), this.options.instance, running.child);
    this.rpc.ended(launch);
    const s = this.state.get();
    if (s.kind !== "ready" || s.running !== running) return;
    if (running.child.groupLingers?.()) this.groupEnd = stopChild(running.child, 0); // a wrapper's shell killed
    const how = exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
    logger.error(`llama-server crashed (${how})`);
    const data = { exit_code: exit.code, signal: exit.signal, log_tail: this.tail.last(TAIL_IN_ERRORS) };
    const err =
      this.rpc.crashError(how, data, this.tail.last(TAIL_IN_ERRORS)) ??
      new CoreError("internal_error", `llama-server crashed (${how})`, data);
    const stopped: StateOf<"stopped"> = { kind: "stopped", restartFor: err, lastError: err };
    this.state.swap(s, stopped);
    void this.rpc.named(err).then((named) => {
      if (named !== err && this.state.get() === stopped)
        this.state.swap(stopped, { kind: "stopped", restartFor: named, lastError: named });
      running.launch.end(named);
    });
  }

  /** Stops a server that served (or was about to): leases see `died`; then launch-steps.ts stopChild. */
  private async halt(running: Running, why: string, untilReleased = false): Promise<void> {
    running.launch.end(cancelledError(`llama-server was stopped (${why})`));
    const early = politeStopWait(running.readyAt, running.launch.servedTask, Date.now());
    if (early > 0) await Bun.sleep(early);
    try {
      const released = untilReleased ? running.released() : undefined;
      await stopChild(running.child, this.options.settings().stopGraceMs, running.childMode.speaks, released);
    } catch (err) {
      logger.warn(`stopping llama-server (pid ${running.child.pid}): ${(err as Error).message}`);
      await stopChild(running.child, 0);
    }
    recordAfterStop(this.options.dataDir(), this.options.instance, running.child);
  }
}
