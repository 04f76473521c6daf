import { type LocalAiClientOptions, numberOr, type ShutdownOptions } from "./client-options.ts";
import type { Connection } from "./connection.ts";
import { initializeCore, spawnCore } from "./core-launch.ts";
import type { CoreProcess } from "./core-process.ts";
import {
  coreExitedError,
  coreInputClosedError,
  coreInputStalledError,
  coreOutputClosedError,
  isLocalAiError,
  LocalAiError,
  ownCopy,
} from "./errors.ts";
import { stopGracefully } from "./graceful-stop.ts";
import { killOnHostExit, spareOnHostExit } from "./host-exit.ts";
import type { ExitInfo } from "./host-types.ts";
import { Restarts, restartOptions } from "./restarts.ts";
import {
  DEFAULT_CORE_STOP_GRACE_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  minShutdownWaitMs,
} from "./shutdown-timing.ts";
import type { InitializeResult } from "./types.ts";

/**
 * idle → starting → ready; an unexpected exit: ready → restarting → starting (or → failed when
 * restarts are off or spent); shutdown()/close()/kill(): any → closed, for good.
 */
type State = "idle" | "starting" | "ready" | "restarting" | "failed" | "closed";

/**
 * The core's lifecycle behind a LocalAiClient: when to launch (core-launch.ts: spawn,
 * initialize), what an exit means (a restart with back-off, restarts.ts), how to stop
 * (graceful-stop.ts). One state, changed only in enter(), which also tells the connection where
 * new requests go.
 */
export class CoreLifecycle {
  private state: State = "idle";
  private process: CoreProcess | undefined;
  /** Counts launches, so the exit of a replaced process is told from the current one's. */
  private generation = 0;
  private ready: Promise<void> | undefined;
  /** When the current core became ready (answered initialize): restarts.ts's uptime. */
  private startedAt = 0;
  /** Undefined when restarts are off. */
  private readonly restarts: Restarts | undefined;
  private readonly stopGraceMs: number;
  /** The stop under way or done: shutdown() and close() called again share it. */
  private stopping: Promise<void> | undefined;
  /**
   * Every core this client spawned whose exit it has not seen: a replaced one may still be
   * stopping (its stdout closed) when start() launches the next.
   */
  private readonly live = new Set<CoreProcess>();
  /**
   * The last resort while a core runs: the host's process exiting kills it, so that a core
   * ignoring end of input does not outlive its host (docs/bootstrap.md "Stopping"). All of
   * them: holding only the newest orphaned one still stopping.
   */
  private readonly killCores = () => {
    for (const proc of this.live) proc.kill("SIGKILL");
  };
  /** Why the last core stopped serving: calls refused once restarts are spent carry it. */
  private lastExit: LocalAiError | undefined;
  /**
   * Ends the restart delay under way at once: a closed client must not hold the host's process
   * open for the rest of a back-off (up to maxDelayMs).
   */
  private endDelay: (() => void) | undefined;

  constructor(
    private readonly options: LocalAiClientOptions,
    private readonly connection: Connection,
    /** Hears the core's answer to initialize on each (re)start. */
    private readonly onInfo: (info: InitializeResult) => void,
  ) {
    const r = options.restart;
    this.restarts = r ? new Restarts(restartOptions(r)) : undefined;
    // Infinity (a host's "never kill it while it stops") is the longest wait a timer holds, as
    // the docs say; taken for the 3 s default, it had the core killed 8 s into its stop.
    const grace = options.stopGraceMs;
    this.stopGraceMs = typeof grace === "number" && grace >= 0 ? grace : DEFAULT_CORE_STOP_GRACE_MS;
    this.enter("idle");
  }

  /** Resolves once a core is ready: launches one unless one is starting or running. */
  started(): Promise<void> {
    if (this.state === "closed") return Promise.reject(closedError());
    if (!this.ready || this.state === "failed") {
      this.restarts?.reset();
      this.ready = this.launch().catch((err: unknown) => {
        const error = err instanceof LocalAiError ? err : new LocalAiError("core_exited", String(err));
        this.lastExit = error;
        if (this.state !== "closed") this.enter("failed");
        // Calls queued behind the start-up fail with its error.
        this.connection.failAll(error);
        throw error;
      });
      this.ready.catch(() => {});
    }
    return this.ready;
  }

  /** The core's process id while it runs. */
  get pid(): number | undefined {
    return this.process?.running ? this.process.pid : undefined;
  }

  get running(): boolean {
    return this.state === "ready";
  }

  /**
   * LocalAiClient.shutdown(). A second call while the first runs returns the same promise: it
   * must not kill a core the first call is still letting stop (docs/bootstrap.md "Stopping").
   */
  shutdown(options: ShutdownOptions = {}): Promise<void> {
    // `?? {}`: a plain-JS host's shutdown(null) threw before it stopped anything, and close(null)
    // then killed the core, leaving llama-server running.
    this.stopping ??= this.stop(options ?? {});
    return this.stopping;
  }

  private async stop(options: ShutdownOptions): Promise<void> {
    // NaN (Number() of an unset setting) made every deadline NaN: no timer on the shutdown
    // request, so a core that never answered it was waited for for good.
    // So did one that is not a number ("5s" from a settings file), and it killed a core that had
    // answered at once, without the second it gets to exit.
    // One whose getter throws too: thrown here, close() took it for a failed stop and killed the core.
    let given: unknown;
    try {
      given = options.timeoutMs;
    } catch {}
    const timeoutMs = numberOr(given, DEFAULT_SHUTDOWN_TIMEOUT_MS);
    const proc = this.process;
    const wasRunning = this.state === "ready" && proc?.running;
    this.enter("closed");
    if (wasRunning && proc)
      await stopGracefully(this.connection, proc, {
        timeoutMs,
        stopGraceMs: this.stopGraceMs,
        logger: this.options.logger,
      });
    // A core being stopped because it could not answer (its stdout closed, its stdin unread) is
    // let finish its stop, llama-server's included: its own timer kills it after the grace.
    else if (proc?.running && proc.stopping) await proc.gone();
    // One still starting has nothing of llama-server's to stop yet: killed, and waited for, so
    // that the stop is over when shutdown() resolves (a host may then remove its data folder).
    else if (proc?.running) {
      proc.kill("SIGKILL");
      await proc.gone();
    }
    // An earlier core still stopping (found mute or hung, then start() again) is over too.
    // gone(), not its exit: one that outlives its SIGKILL must not hold the stop for good.
    await Promise.all([...this.live].map((p) => p.gone()));
    this.connection.failAll(closedError());
  }

  /** LocalAiClient.kill(). */
  kill(): void {
    this.enter("closed");
    this.killCores();
    this.connection.failAll(closedError());
  }

  // ---- state -------------------------------------------------------------------------------

  /** Every state change goes through here, so the connection's route always matches the state. */
  private enter(state: State): void {
    this.state = state;
    switch (state) {
      case "idle":
        this.connection.refuse(
          (method) =>
            new LocalAiError("core_exited", "the core was not started (call start())", undefined, method),
        );
        return;
      case "starting":
      case "restarting":
        // Calls made now wait for the core to be ready (within their own time limit).
        this.connection.hold();
        return;
      case "ready":
        if (this.process) this.connection.attach(this.process);
        return;
      case "failed":
        this.connection.refuse((method) => this.notRestartingError(method));
        return;
      case "closed":
        this.connection.refuse((method) => closedError(method));
        this.endDelay?.();
    }
  }

  /** What calls get once no core runs nor will: the last exit's error, data included. */
  private notRestartingError(method: string): LocalAiError {
    const last = this.lastExit;
    const why = last ? `: ${last.message}` : "";
    const data = last && isLocalAiError(last, "core_exited") ? ownCopy(last.data) : undefined;
    return new LocalAiError("core_exited", `the core has exited and is not restarting${why}`, data, method);
  }

  // ---- launching and restarting ------------------------------------------------------------

  private async launch(): Promise<void> {
    this.enter("starting");
    // Awaited only when there is one: a start's spawn stays in the call that asked for it.
    if (this.process?.running) await this.previousStopped(this.process);
    const generation = ++this.generation;
    const proc = spawnCore(this.options, this.connection, {
      onExit: (info) => {
        this.forget(proc);
        this.handleExit(generation, info);
      },
      onOutputClosed: () => {
        this.handleBrokenCore(generation, proc, coreOutputClosedError(proc.stderrTail));
      },
      onInputClosed: () => {
        // It reads no end of input now: SIGTERM stops the core as a shutdown does.
        this.handleBrokenCore(generation, proc, coreInputClosedError(proc.stderrTail), "SIGTERM");
      },
      onKillIgnored: (ms) => {
        this.options.logger?.warn(
          `the core (pid ${proc.pid}) still runs ${ms} ms after its SIGKILL; no longer waiting for it`,
        );
      },
      onInputStalled: (ms, bytes) => {
        // It reads nothing, not even end of input: SIGTERM stops the core as a shutdown does.
        this.handleBrokenCore(generation, proc, coreInputStalledError(ms, bytes, proc.stderrTail), "SIGTERM");
      },
    });
    this.process = proc;
    this.live.add(proc);
    // One entry per client in one shared hook (host-exit.ts): a relaunch finds it in place.
    killOnHostExit(this.killCores);
    this.onInfo(await initializeCore(this.options, this.connection, proc));
    // Its exit may come before its answer (with its stdout's end, read after the exit event):
    // handled then as a start-up's, it would have left the client ready on a dead core.
    const exit = proc.exitInfo;
    if (exit) throw coreExitedError(exit);
    if (this.state !== "starting" || generation !== this.generation) {
      throw new LocalAiError("core_exited", "the core exited during start-up");
    }
    // Its run is timed from here: timed from its spawn, a slow start-up (seconds on a cold disk)
    // counted as serving, and a core crashing once ready reset the restart count every time.
    this.startedAt = Date.now();
    this.enter("ready");
  }

  /**
   * A core still stopping (found mute or hung, up to its grace and 5 s) ends before the next is
   * spawned: two cores never share the data folder, and its exit is heard as this client's.
   */
  private async previousStopped(previous: CoreProcess): Promise<void> {
    if (!previous.stopping) previous.stop(minShutdownWaitMs(this.stopGraceMs));
    await previous.gone();
    // shutdown() or kill() meanwhile: nothing is launched.
    if (this.state !== "starting") throw closedError();
    // One its SIGKILL did not end (uninterruptible sleep): waited for, the start never ended.
    if (previous.running) throw stillRunningError(previous);
  }

  /** `proc` has exited: once none of this client's cores runs, the host's exit hook lets it go. */
  private forget(proc: CoreProcess): void {
    this.live.delete(proc);
    if (this.live.size === 0) spareOnHostExit(this.killCores);
  }

  private handleExit(generation: number, info: ExitInfo): void {
    if (generation !== this.generation) return;
    const proc = this.process;
    const closing = this.state === "closed";
    // A core the client killed itself (its initialize failed) ended as expected. Its launch has
    // failed already: taken for a crash, its exit restarted a first start() that had failed, or
    // began a second restart loop in the back-off of a restart's failed launch.
    const expected = closing || proc?.retired === true;
    const error = coreExitedError(info);
    // Why its initialize failed, or why it was stopped (mute, hung), stays the reason, not the
    // exit that followed.
    if (!expected && !proc?.stopping) this.lastExit = error;
    // Requests written to this process can never be answered now.
    this.connection.failAll(closing ? closedError() : error, (sentTo) => sentTo === proc);
    const serving = this.state === "ready";
    const restarts = expected ? undefined : this.stopServing(error);
    // The restart is what start() joins before the host hears of the exit: a start() from onExit
    // got the first start's promise, long resolved, while no core ran. It begins after onExit.
    let begin: (() => void) | undefined;
    if (restarts) this.scheduleRestart(restarts, error, new Promise<void>((resolve) => (begin = resolve)));
    // The host hears of it once the client's own bookkeeping is done.
    this.options.onExit?.({ ...info, expected });
    begin?.();
    // Unless onExit started one again: then the host is not told it gave up.
    if (serving && !expected && !restarts && this.state === "failed") this.options.onFailed?.(error);
  }

  /**
   * The core runs but can no longer serve: it closed its stdout, or reads nothing of its stdin.
   * What was sent to it fails now with `error`, and it is stopped; a restart, when one is due,
   * follows its exit.
   */
  private handleBrokenCore(
    generation: number,
    proc: CoreProcess,
    error: LocalAiError,
    signal?: NodeJS.Signals,
  ): void {
    if (generation !== this.generation || this.state === "closed" || !proc.running) return;
    // Once: a hung core's stdout closing as it stops is no second failure, nor a new reason.
    if (proc.stopping) return;
    this.lastExit = error;
    this.connection.failAll(error, (sentTo) => sentTo === proc);
    this.options.logger?.warn(`${error.message}; stopping it`);
    // Never killed before it could stop llama-server (docs/bootstrap.md "Stopping").
    proc.stop(minShutdownWaitMs(this.stopGraceMs), signal);
    // The restart is scheduled now, so that a start() while it stops joins it (it got the first
    // start's promise, long resolved); it launches once this core has exited, never beside it.
    const serving = this.state === "ready";
    const restarts = this.stopServing(error);
    if (restarts) this.scheduleRestart(restarts, error, proc.gone());
    else if (serving) this.options.onFailed?.(error);
  }

  /**
   * The serving core is gone or going, and nobody asked: new calls wait for a restart, or fail
   * at once when none will come. The restarts to run, when one is due.
   */
  private stopServing(error: LocalAiError): Restarts | undefined {
    // One that ends during its start-up is its launch's failure, handled by its caller; while
    // restarting, the restart under way owns what comes; failed, nothing is left to stop.
    if (this.state !== "ready") return undefined;
    this.restarts?.servedFor(Date.now() - this.startedAt);
    if (!this.restarts || this.restarts.spent) {
      this.enter("failed");
      this.connection.failAll(error);
      return undefined;
    }
    this.enter("restarting");
    return this.restarts;
  }

  /** The restart, begun once `after` settles: until it ends, start() resolves with it. */
  private scheduleRestart(restarts: Restarts, error: LocalAiError, after: Promise<unknown>): void {
    this.ready = after.then(() => this.restartLoop(restarts, error));
    this.ready.catch(() => {});
  }

  /** Relaunches with a doubling delay until a launch succeeds or the attempts run out. */
  private async restartLoop(restarts: Restarts, exitErr: LocalAiError): Promise<void> {
    let lastError = exitErr;
    while (!restarts.spent) {
      // onExit, or onRestart before a retry, may have closed the client.
      if (this.state !== "restarting") throw closedError();
      const { attempt, delayMs } = restarts.next();
      this.options.onRestart?.({ attempt, delayMs });
      await this.delay(delayMs);
      if (this.state !== "restarting") throw closedError();
      try {
        await this.launch();
        return;
      } catch (err) {
        if ((this.state as State) === "closed") throw closedError();
        this.enter("restarting");
        if (err instanceof LocalAiError) lastError = err;
        this.lastExit = lastError;
      }
    }
    this.enter("failed");
    this.connection.failAll(lastError);
    this.options.onFailed?.(lastError);
    throw lastError;
  }

  private delay(ms: number): Promise<void> {
    // onRestart, just called, may have closed the client.
    if (this.state !== "restarting") return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.endDelay?.(), ms);
      this.endDelay = () => {
        clearTimeout(timer);
        this.endDelay = undefined;
        resolve();
      };
    });
  }
}

/** A core still running after its SIGKILL (CoreProcess.gone()): no other is started beside it. */
function stillRunningError(proc: CoreProcess): LocalAiError {
  const message = `the previous core (pid ${proc.pid}) still runs after its SIGKILL; no other is started beside it`;
  return new LocalAiError("core_exited", message, {
    exit_code: null,
    signal: null,
    stderr_tail: proc.stderrTail,
  });
}

export function closedError(method?: string): LocalAiError {
  return new LocalAiError("client_closed", "the client was shut down", undefined, method);
}
