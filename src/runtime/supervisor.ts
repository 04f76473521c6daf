import { join } from "node:path";
import type { LlamaEndpoint } from "../llama/http.ts";
import { isSleeping } from "../llama/props.ts";
import { awaitModel } from "../llama/tokenize.ts";
import { renderArgv } from "../plan/argv.ts";
import type { LaunchPlan } from "../plan/launch-plan.ts";
import { CoreError, cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import { logger } from "../util/logger.ts";
import { Semaphore } from "../util/semaphore.ts";
import { randomApiKey } from "./child-env.ts";
import type { AcquireOptions, LlamaLease, LlamaProvider, StartTicket } from "./endpoint.ts";
import { SleepWatch } from "./idle-sleep.ts";
import { type Exit, launchOnce, type Spawned, stopChild, TAIL_IN_ERRORS } from "./launch-steps.ts";
import { dialectFor, type LoadModeProbe } from "./load-mode.ts";
import { LogTail, RotatingLog } from "./log-sink.ts";
import { llamaPrograms, reapLeftover, removePidRecord } from "./pid-file.ts";
import { pickFreePort } from "./ports.ts";
import { intakeFraction, modelIntake } from "./proc-memory.ts";
import { ProgressBeat, type Unstamped } from "./progress-beat.ts";
import { RestartBudget, type RestartRate, type RestartVerdict } from "./restart-budget.ts";
import { RpcWatch } from "./rpc-watch.ts";
import type { SupervisorSnapshot } from "./snapshot.ts";
import { bunSpawner, type Spawner } from "./spawn.ts";
import type { StartProgress } from "./start-progress.ts";
import { type Running, StateCell, type StateOf, type SupervisorState } from "./supervisor-state.ts";

export type { SupervisorSnapshot } from "./snapshot.ts";

/** Timings and limits, from config.yaml's `llama` section (read at each start). */
export interface SupervisorSettings {
  startupTimeoutMs: number;
  stopGraceMs: number;
  /** Automatic restarts allowed within `restartWindowMs` (a rate, so the budget recovers). */
  maxRestarts: number;
  restartWindowMs: number;
  restartBackoffMs: number;
  requestTimeoutMs: number;
  logMaxBytes: number;
  logFiles: number;
}

export interface SupervisorOptions {
  /** Where llama-server is; `tried` becomes binary_missing's data. */
  findBinary: () => { path: string } | { tried: string[] };
  /** The planner's launch plan; its argv is rendered at each spawn. */
  plan: () => Promise<LaunchPlan>;
  dataDir: () => string;
  settings: () => SupervisorSettings;
  /** Slots before any plan exists (initialize may ask before the first start). */
  fallbackSlots?: () => number;
  spawner?: Spawner;
  /** Whether a binary takes `--load-mode` (load-mode.ts); asks its `--help` when absent. */
  loadMode?: LoadModeProbe;
  pickPort?: () => Promise<number>;
  /** The environment the child's is built from. */
  env?: Record<string, string | undefined>;
  healthIntervalMs?: number;
  /** Port choices before a bind failure is final. */
  maxBindAttempts?: number;
  /** Reap leftovers of dead cores before the first start (tests turn it off). */
  reap?: boolean;
  /** The clock the restart budget's window runs on (ms since the epoch); tests move it. */
  now?: () => number;
}

const MAX_BACKOFF_MS = 30_000;

const shuttingDown = () => cancelledError("llama-server is stopping: the core is shutting down");

/**
 * Owns llama-server's life as one state (supervisor-state.ts): stopped → starting → ready →
 * stopping → stopped, and closing → closed at shutdown. Concurrent acquire() callers share one
 * start; leases map to llama-server's parallel slots (a semaphore) and extra callers wait; a
 * crash aborts every lease's `died` signal and the next acquire restarts, within a restart
 * budget and with back-off.
 */
export class Supervisor implements LlamaProvider {
  private readonly state = new StateCell();
  private readonly gate = new Semaphore(() => this.slots());
  private readonly budget = new RestartBudget();
  private readonly now: () => number;
  private plan: LaunchPlan | undefined;
  /** Leftovers of dead cores are reaped once, before the first start. */
  private reaped: Promise<unknown> | undefined;
  private log: RotatingLog | undefined;
  readonly tail = new LogTail();
  private readonly spawner: Spawner;
  private readonly pickPort: () => Promise<number>;
  /** The RPC workers of the current launch: their log signatures, the one that was lost. */
  private readonly rpc = new RpcWatch({ onLost: (err) => this.failReady(err) });

  constructor(private readonly options: SupervisorOptions) {
    this.spawner = options.spawner ?? bunSpawner;
    this.pickPort = options.pickPort ?? pickFreePort;
    this.now = options.now ?? Date.now;
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

  slots(): number {
    return this.plan?.slots ?? this.options.fallbackSlots?.() ?? 1;
  }

  private slotsOrOne(): number {
    try {
      return this.slots();
    } catch {
      return 1;
    }
  }

  /** Never throws and never touches llama-server: `status` answers from it at once. */
  snapshot(): SupervisorSnapshot {
    const s = this.state.get();
    const running = serving(s);
    const stopped = s.kind === "stopped" ? s : undefined;
    const plan = this.plan;
    return {
      state: s.kind,
      pid: running?.child.pid ?? (s.kind === "starting" ? (s.pid ?? null) : null),
      startedAt: running?.startedAt ?? null,
      readyAt: running?.readyAt ?? null,
      // Down: why. Restarting (or a failed server being stopped): what it follows.
      lastError: stopped?.lastError ?? ("restartFor" in s ? (s.restartFor ?? null) : null),
      restartPending: "restartFor" in s && s.restartFor !== undefined,
      restarts: this.restartReport(s),
      slots: { busy: this.gate.inUse, waiting: this.gate.waiting, total: this.slotsOrOne() },
      sleep: s.kind === "ready" ? s.running.sleep.state : "awake",
      idleSleepMs: plan ? plan.idle_sleep_s * 1000 : null,
      model: {
        path: plan?.model_path ?? null,
        name: plan?.model_name ?? null,
        bytes: plan?.model_bytes ?? null,
        contextPerSlot: plan?.context_per_slot ?? null,
      },
    };
  }

  async acquire(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<LlamaLease> {
    for (;;) {
      signal.throwIfAborted();
      const running = await this.whenRunning(
        signal,
        onProgress,
        options?.explicit === true,
        options?.prestarted,
      );
      const release = await this.gate.acquire(signal);
      // It may have died while we waited for a slot: give the slot back and start again.
      const s = this.state.get();
      if (running.died.signal.aborted || s.kind !== "ready" || s.running !== running) {
        release();
        continue;
      }
      try {
        // Asleep (llama.idle_sleep_s): wait for the model to reload, with progress.
        await running.sleep.lease(signal, onProgress);
      } catch (err) {
        running.sleep.release();
        release();
        if (signal.aborted) throw signal.reason;
        // It died while waking (the crash is handled by onExit), or never woke: start again.
        if (!running.died.signal.aborted) this.reportFailure(running, (err as Error).message);
        continue;
      }
      return this.lease(running, release);
    }
  }

  prestart(): StartTicket | undefined {
    const s = this.state.get();
    if (s.kind !== "stopped" || s.restartFor !== undefined) return undefined;
    this.beginStart(s, false);
    const now = this.state.get();
    return now.kind === "starting" ? new Prestart(now) : undefined;
  }

  async stop(): Promise<void> {
    const from = this.state.get();
    if (from.kind === "closed") return;
    if (from.kind === "closing") return from.done;
    const done = Promise.withResolvers<void>();
    const closing: SupervisorState = { kind: "closing", done: done.promise };
    this.state.swap(from, closing);
    this.gate.failWaiters(shuttingDown());
    try {
      if (from.kind === "starting") {
        from.abort.abort(shuttingDown());
        await from.done.catch(() => {});
      } else if (from.kind === "ready") {
        await this.halt(from.running, "stop");
      } else if (from.kind === "stopping") {
        await from.done;
      }
    } finally {
      this.state.swap(closing, { kind: "closed" });
      this.log?.close();
      done.resolve();
    }
  }

  /** A ready server, after starting it or waiting for the start or stop under way. */
  private async whenRunning(
    signal: AbortSignal,
    onProgress: ((p: StartProgress) => void) | undefined,
    explicit: boolean,
    prestarted?: StartTicket,
  ): Promise<Running> {
    for (;;) {
      const s = this.state.get();
      // The start this caller began on arrival failed, and nothing happened since: its error
      // is the answer (once), rather than a second launch that would fail the same way.
      if (prestarted instanceof Prestart && prestarted.failedInto(s)) throw prestarted.take();
      switch (s.kind) {
        case "ready":
          return s.running;
        case "closing":
        case "closed":
          throw shuttingDown();
        case "stopping":
          await this.waitOutStop(s, signal, onProgress);
          continue;
        case "starting":
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

  /** A failed server is being stopped before the restart: `restarting` while it goes. */
  private async waitOutStop(
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

  /** stopped → starting; throws (leaving the state alone) when a restart is over budget. */
  private beginStart(from: StateOf<"stopped">, explicit: boolean): void {
    const backoffMs = from.restartFor ? this.restartDelay(from.restartFor, explicit) : 0;
    const done = Promise.withResolvers<Running>();
    // Every caller may have given up (aborted); the failure is still theirs, not unhandled.
    done.promise.catch(() => {});
    const since = Date.now();
    const starting: StateOf<"starting"> = {
      kind: "starting",
      since,
      restartFor: from.restartFor,
      abort: new AbortController(),
      spawned: Promise.withResolvers<void>(),
      // Loading's fraction: how much of the model the child has taken in (Linux /proc).
      progress: new ProgressBeat(since, () =>
        starting.pid === undefined
          ? undefined
          : intakeFraction(modelIntake(starting.pid), this.plan?.model_bytes),
      ),
      done: done.promise,
    };
    // The caller hears this start through joinStart, like every other caller.
    if (backoffMs > 0) starting.progress.report({ phase: "restarting", backoff_ms: backoffMs });
    this.state.swap(from, starting);
    this.runStart(starting, backoffMs).then(done.resolve, done.reject);
  }

  /**
   * The back-off before a restart, counted against the budget; throws when it is spent. A
   * start the host asked for (warmup) goes at once and is not counted: the host decided.
   */
  private restartDelay(last: CoreError, explicit: boolean): number {
    if (explicit) {
      logger.info("restarting llama-server now: the host asked (warmup)");
      return 0;
    }
    const settings = this.options.settings();
    const verdict = this.budget.take(restartRate(settings), this.now());
    if (!verdict.allowed) throw this.budgetSpent(last, verdict, settings);
    const delay = backoffDelayMs(verdict.attempt, settings.restartBackoffMs, MAX_BACKOFF_MS);
    logger.info(
      `restarting llama-server (restart ${verdict.attempt}/${settings.maxRestarts} within ${settings.restartWindowMs / 1000} s) in ${delay} ms`,
    );
    return delay;
  }

  /** The refusal a chat gets: why, and when the next automatic try will be. */
  private budgetSpent(
    last: CoreError,
    verdict: Extract<RestartVerdict, { allowed: false }>,
    settings: SupervisorSettings,
  ): CoreError {
    const windowS = settings.restartWindowMs / 1000;
    const nextTryAt = verdict.nextAt === null ? null : new Date(verdict.nextAt).toISOString();
    const retryInMs = verdict.nextAt === null ? null : Math.max(0, verdict.nextAt - this.now());
    const when =
      nextTryAt === null
        ? "automatically at all (llama.max_restarts = 0)"
        : `automatically before ${nextTryAt} (in ${Math.ceil((retryInMs as number) / 1000)} s; llama.max_restarts = ${settings.maxRestarts} per llama.restart_window_s = ${windowS})`;
    return new CoreError(
      "internal_error",
      `llama-server failed after ${verdict.used} restarts within ${windowS} s; not restarting it ${when}; a warmup tries again at once. Last failure: ${last.message}`,
      {
        restarts: verdict.used,
        next_try_at: nextTryAt,
        retry_in_ms: retryInMs,
        log_tail: this.tail.last(TAIL_IN_ERRORS),
      },
    );
  }

  private restartReport(s: SupervisorState): SupervisorSnapshot["restarts"] {
    let settings: SupervisorSettings;
    try {
      settings = this.options.settings();
    } catch {
      // The config cannot be read (status must answer all the same): then nothing ever started.
      return { used: 0, max: null, windowMs: null, nextAutomaticTryAt: null };
    }
    const rate = restartRate(settings);
    const now = this.now();
    const pending = s.kind === "stopped" && s.restartFor !== undefined;
    const verdict = pending ? this.budget.peek(rate, now) : undefined;
    return {
      used: this.budget.used(rate, now),
      max: rate.max,
      windowMs: rate.windowMs,
      nextAutomaticTryAt: verdict && !verdict.allowed ? verdict.nextAt : null,
    };
  }

  /** The start job: back-off, reap, launch; it owns `starting` until ready or failed. */
  private async runStart(starting: StateOf<"starting">, backoffMs: number): Promise<Running> {
    const { signal } = starting.abort;
    try {
      if (backoffMs > 0) await abortable(Bun.sleep(backoffMs), signal);
      starting.progress.report({ phase: "starting", attempt: 1 });
      if (this.options.reap !== false) {
        this.reaped ??= reapLeftover(this.options.dataDir(), {
          configured: { "llama-server": llamaPrograms(this.options.findBinary()) },
        }).catch(() => {});
        await this.reaped;
      }
      signal.throwIfAborted();
      const running = await this.startServer(starting);
      if (!this.state.swap(starting, { kind: "ready", running })) {
        // stop() took over while the last step finished: this server never serves.
        await this.halt(running, "stop");
        throw shuttingDown();
      }
      void running.child.exited.then((e) => this.onExit(running, e));
      logger.info(
        `llama-server ready on ${running.baseUrl} (pid ${running.child.pid}) after ${running.readyAt - running.startedAt} ms`,
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

  /** Binary and plan, then launches until one is ready; only bind failures try another port. */
  private async startServer(starting: StateOf<"starting">): Promise<Running> {
    const settings = this.options.settings();
    const found = this.options.findBinary();
    if (!("path" in found)) {
      throw new CoreError(
        "binary_missing",
        `llama-server not found; tried: ${found.tried.join(", ") || "(nothing)"}`,
        {
          tried: found.tried,
        },
      );
    }
    const plan = await this.options.plan();
    this.plan = plan;
    this.rpc.begin(plan.rpc_workers);
    const dataDir = this.options.dataDir();
    this.log ??= new RotatingLog(join(dataDir, "logs"), settings.logMaxBytes, settings.logFiles);
    // The beat stamps each event with the time since this start began.
    const emit = (p: Unstamped) => starting.progress.report(p);
    const parentEnv = this.options.env ?? process.env;
    // argv is rendered here, once, in the flags this build takes (load-mode.ts).
    const argv = renderArgv(plan, await dialectFor(found.path, plan, parentEnv, this.options.loadMode));
    const attempts = this.options.maxBindAttempts ?? 5;
    let last: CoreError | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      // The first attempt's `starting` went out before the reap and the plan.
      if (attempt > 1) emit({ phase: "starting", attempt });
      const outcome = await launchOnce(
        {
          binary: found.path,
          argv,
          port: await this.pickPort(),
          apiKey: randomApiKey(),
          env: parentEnv,
          spawner: this.spawner,
          dataDir,
          onLine: (line) => {
            this.tail.push(line);
            this.log?.write(`${line}\n`);
            this.rpc.line(line);
          },
          onSpawn: (pid, header) => {
            starting.pid = pid;
            this.log?.write(header);
            starting.spawned.resolve();
          },
        },
        {
          startupTimeoutMs: settings.startupTimeoutMs,
          intervalMs: this.options.healthIntervalMs ?? 100,
          signal: starting.abort.signal,
          emit,
        },
      );
      if (!("error" in outcome)) {
        const skipped = this.rpc.afterReady(outcome.tail.last());
        if (skipped) {
          await stopChild(outcome.child, 0);
          removePidRecord(dataDir);
          throw skipped;
        }
        emit({ phase: "ready" });
        return this.toRunning(outcome, plan);
      }
      last = outcome.error;
      if (!outcome.retryPort) throw outcome.error;
      logger.warn(`${outcome.error.message}; choosing another port`);
    }
    throw last as CoreError;
  }

  private lease(running: Running, releaseSlot: () => void): LlamaLease {
    let released = false;
    return {
      baseUrl: running.baseUrl,
      apiKey: running.apiKey,
      died: running.died.signal,
      requestTimeoutMs: this.options.settings().requestTimeoutMs,
      release: () => {
        if (released) return;
        released = true;
        running.sleep.release();
        releaseSlot();
      },
      reportFailure: (reason: string) => this.reportFailure(running, reason),
    };
  }

  /** A ready launch as leases see it, with its idle-sleep watch (idle-sleep.ts). */
  private toRunning(spawned: Spawned, plan: LaunchPlan): Running {
    const endpoint = { baseUrl: spawned.baseUrl, apiKey: spawned.apiKey };
    const pid = spawned.child.pid;
    const sleep = new SleepWatch({
      idleMs: plan.idle_sleep_s * 1000,
      isAsleep: () => isSleeping(endpoint),
      rouse: (signal) => wake(endpoint, signal, this.options.settings().startupTimeoutMs),
      // A wake re-reads the model in a process that has read before: count from here.
      wakeMeasure: () => {
        const before = modelIntake(pid)?.readBytes ?? 0;
        return () => intakeFraction(modelIntake(pid), plan.model_bytes, before);
      },
    });
    return {
      child: spawned.child,
      baseUrl: spawned.baseUrl,
      apiKey: spawned.apiKey,
      port: spawned.port,
      died: new AbortController(),
      startedAt: spawned.t0,
      readyAt: Date.now(),
      sleep,
    };
  }

  /** A lease's server failed it (wedged, protocol garbage): restart it, counted against the budget. */
  private reportFailure(running: Running, reason: string): void {
    const s = this.state.get();
    if (s.kind !== "ready" || s.running !== running) return;
    logger.warn(`llama-server failed a request (${reason}); restarting it`);
    const err = new CoreError(
      "internal_error",
      `llama-server stopped serving (${reason}); it will be restarted`,
      {
        log_tail: this.tail.last(TAIL_IN_ERRORS),
      },
    );
    this.failRunning(s, err);
  }

  /** The ready server lost an RPC worker (rpc-watch.ts): leases get the named error; restart. */
  private failReady(err: CoreError): void {
    const s = this.state.get();
    if (s.kind !== "ready") return;
    this.failRunning(
      s,
      new CoreError(err.code, err.message, { ...err.data, log_tail: this.tail.last(TAIL_IN_ERRORS) }),
    );
  }

  /** ready → stopping → stopped, the next start a restart for `err`, which leases see at once. */
  private failRunning(s: StateOf<"ready">, err: CoreError): void {
    const { running } = s;
    running.died.abort(err);
    const done = Promise.withResolvers<void>();
    const stopping: StateOf<"stopping"> = { kind: "stopping", running, restartFor: err, done: done.promise };
    this.state.swap(s, stopping);
    void this.halt(running, "failure").finally(() => {
      this.state.swap(stopping, { kind: "stopped", restartFor: err, lastError: err });
      done.resolve();
    });
  }

  /** The serving child exited: expected while stopping or closing, a crash while ready. */
  private onExit(running: Running, exit: Exit): void {
    running.sleep.dispose();
    removePidRecord(this.options.dataDir());
    this.rpc.ended();
    const s = this.state.get();
    if (s.kind !== "ready" || s.running !== running) return;
    const how = exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
    logger.error(`llama-server crashed (${how})`);
    const data = { exit_code: exit.code, signal: exit.signal, log_tail: this.tail.last(TAIL_IN_ERRORS) };
    const err =
      this.rpc.crashError(how, data, this.tail.last(TAIL_IN_ERRORS)) ??
      new CoreError("internal_error", `llama-server crashed (${how})`, data);
    this.state.swap(s, { kind: "stopped", restartFor: err, lastError: err });
    running.died.abort(err);
  }

  /** Stops a server that served (or was about to): leases see `died`, SIGTERM, SIGKILL after the grace. */
  private async halt(running: Running, why: string): Promise<void> {
    running.sleep.dispose();
    if (!running.died.signal.aborted) running.died.abort(cancelledError(`llama-server was stopped (${why})`));
    try {
      await stopChild(running.child, this.options.settings().stopGraceMs);
    } catch (err) {
      logger.warn(`stopping llama-server (pid ${running.child.pid}): ${(err as Error).message}`);
      await stopChild(running.child, 0);
    }
    removePidRecord(this.options.dataDir());
  }
}

function restartRate(settings: SupervisorSettings): RestartRate {
  return { max: settings.maxRestarts, windowMs: settings.restartWindowMs };
}

/** The child that leases point at: ready, or being stopped. */
function serving(s: SupervisorState): Running | undefined {
  return s.kind === "ready" || s.kind === "stopping" ? s.running : undefined;
}

/** What prestart() hands out: the start it began, to recognise that start's failure later. */
class Prestart implements StartTicket {
  private told = false;

  constructor(private readonly start: StateOf<"starting">) {}

  get spawned(): Promise<void> {
    return this.start.spawned.promise;
  }

  /** The state is the one this start's failure left, and its error has not been given out yet. */
  failedInto(s: SupervisorState): boolean {
    return !this.told && this.start.failure?.into === s;
  }

  take(): unknown {
    this.told = true;
    return this.start.failure?.error;
  }
}

/**
 * Wakes a sleeping server (llama/tokenize.ts `awaitModel`), within `timeoutMs`
 * (llama.startup_timeout_s: a reload is the same load as a start). Rejects when `signal` aborts
 * (the server is gone) or the time is up.
 */
async function wake(endpoint: LlamaEndpoint, signal: AbortSignal, timeoutMs: number): Promise<void> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    await awaitModel(endpoint, AbortSignal.any([signal, timeout]));
  } catch (err) {
    if (timeout.aborted && !signal.aborted)
      throw new Error(`it did not reload its model within ${timeoutMs / 1000} s (llama.startup_timeout_s)`);
    throw err;
  }
}
